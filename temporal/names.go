package temporal

// The names a client and a worker agree on.
const (
	// WorkflowName is the session workflow's type.
	WorkflowName = "agentfsm.Session"

	// UpdatePrompt sends a prompt (a string) and completes when the turn
	// settles: with no error when it succeeded, else an application error
	// whose type is the turn_settled code (docs/rpc.md), "busy" while
	// another turn is in flight. While the run continues as new it is
	// refused, typed "continuing": send it again (Prompt does).
	UpdatePrompt = "prompt"
	// UpdateCompact compacts now, with optional instructions (a string),
	// and completes with the transcript.Compaction made, or an application
	// error typed as UpdatePrompt's.
	UpdateCompact = "compact"

	// SignalAbort stops whatever the session is doing.
	SignalAbort = "abort"
	// SignalAbortRetry cancels a pending backoff.
	SignalAbortRetry = "abort_retry"
	// SignalAbortCompaction cancels the compaction in flight.
	SignalAbortCompaction = "abort_compaction"
	// SignalSetAutoRetry writes retry.enabled (a bool; a signal without
	// one, or with something else, is logged and changes nothing).
	SignalSetAutoRetry = "set_auto_retry"
	// SignalSetAutoCompaction writes compaction.enabled (a bool, as
	// SignalSetAutoRetry).
	SignalSetAutoCompaction = "set_auto_compaction"
	// SignalClose aborts what is in flight, delivers the events left and
	// ends the workflow.
	SignalClose = "close"

	// QueryState answers the session's observable state, the fields of
	// the RPC get_state (an rpc.State).
	QueryState = "get_state"

	// The activities.
	ActivityRun            = "agentfsm.Run"
	ActivitySummarize      = "agentfsm.Summarize"
	ActivityMarkUsageLimit = "agentfsm.MarkUsageLimit"
	ActivityDeliver        = "agentfsm.Deliver"
	// The step-wise run's activities (StepAgent): one model call, one
	// tool call.
	ActivityModel = "agentfsm.Model"
	ActivityTool  = "agentfsm.Tool"
)
