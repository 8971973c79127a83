package temporal

import (
	"context"
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
)

// MemoKey is the key, in the session workflow's memo, of its MemoState.
const MemoKey = "agentfsm.state"

// changeMemoState is the workflow.GetVersion change ID of a workflow that
// keeps its MemoState in its memo.
const changeMemoState = "memo-state"

// MemoState is the part of a session's state the workflow keeps in its
// memo, where a client reads it with DescribeWorkflow (DescribeState) while no worker is up, unlike the get_state query. The
// workflow upserts it each time one of its fields changes.
type MemoState struct {
	// State is the recovery machine's state (idle, backoff, ...).
	State string `json:"state"`
	// RetryAttempt is the attempt of the retry chain in progress; 0 with
	// none.
	RetryAttempt int `json:"retryAttempt"`
	// NextRetryAt is, while the session waits (a backoff, a usage limit's
	// reset, a shared limit), when the wait ends and the run goes, by the
	// workflow's clock; zero otherwise.
	NextRetryAt time.Time `json:"nextRetryAt,omitzero"`
	// LastErrorClass is the class (classify.Class's wire name) of the last
	// error the session met: the last retry's, or the one that failed a
	// turn; empty before any.
	LastErrorClass string `json:"lastErrorClass,omitempty"`
	// Ended is set by DescribeState when the session's workflow is no
	// longer running (closed, terminated by the server or an operator,
	// timed out, failed): the fields above are then those it ended with.
	// The workflow does not write it.
	Ended bool `json:"-"`
}

// noteEvent keeps, from an event the engine emitted, what the memo says of
// the last error.
func (d *driver) noteEvent(ev events.Event) {
	var c classify.Class
	switch ev := ev.(type) {
	case events.AutoRetryStart:
		c = ev.ErrorClass
	case events.AutoRetryEnd:
		c = ev.ErrorClass
	case events.TurnSettled:
		c = ev.ErrorClass
	}
	if c != classify.None {
		d.lastClass = c.String()
	}
}

// loadMemo reads the memo a run started with: the one the run before
// wrote, carried over by continue-as-new, so that the last error's class
// goes on and an unchanged memo is not written again. A memo the workers'
// payload codec encoded (the SDK writes it with their data converter)
// cannot be read here: the class then comes from Start.LastErrorClass,
// and the run writes its memo once.
func (d *driver) loadMemo(ctx workflow.Context, carried string) {
	d.lastClass = carried
	p, ok := workflow.GetInfo(ctx).Memo.GetFields()[MemoKey]
	if !ok {
		return
	}
	if !plainJSON(p) {
		return
	}
	var m MemoState
	if err := converter.GetDefaultDataConverter().FromPayload(p, &m); err != nil {
		workflow.GetLogger(ctx).Error("temporal: the memo's state cannot be read", "error", err)
		return
	}
	d.memoLast, d.memoSet, d.lastClass = m, true, m.LastErrorClass
}

// plainJSON reports whether p is a payload of the default data
// converter's JSON encoding, not one a payload codec made.
func plainJSON(p *commonpb.Payload) bool {
	return string(p.GetMetadata()[converter.MetadataEncoding]) == converter.MetadataEncodingJSON
}

// upsertMemo writes the memo when what it holds changed.
func (d *driver) upsertMemo(ctx workflow.Context) {
	if !d.memo {
		return
	}
	st := d.engine.Status()
	m := MemoState{State: string(st.State), RetryAttempt: st.Attempt, LastErrorClass: d.lastClass}
	if d.timerCancel != nil {
		m.NextRetryAt = d.timerAt.UTC()
	}
	if d.memoSet && m == d.memoLast {
		return
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{MemoKey: m}); err != nil {
		workflow.GetLogger(ctx).Error("temporal: the memo was not written", "error", err)
		return
	}
	d.memoLast, d.memoSet = m, true
}

// Describer is the part of a client.Client that DescribeState uses.
type Describer interface {
	DescribeWorkflow(ctx context.Context, workflowID, runID string) (*client.WorkflowExecutionDescription, error)
}

// ErrNoMemoState is DescribeState's error for a workflow whose memo holds
// no MemoState: one started before the workflow kept it, and not yet past
// a change of state since.
var ErrNoMemoState = errors.New("temporal: the workflow's memo holds no session state")

// DescribeState reads the MemoState of session workflowID (its current
// run) from the server, with no worker involved: use it where a worker
// may be down, and the get_state query (every field of rpc.State, the
// engine's own answer, but only while a worker runs the workflow) where
// one is up. It reads the memo as the default data converter wrote it; on
// a task queue whose data converter has a payload codec use
// DescribeStateWith.
func DescribeState(ctx context.Context, c Describer, workflowID string) (MemoState, error) {
	return DescribeStateWith(ctx, c, nil, workflowID)
}

// DescribeStateWith is DescribeState for a task queue whose workers' data
// converter has a payload codec (a claimcheck.Codec whose Threshold is
// below the memo's size, an encryption codec): the SDK writes the memo
// with that data converter, codec included, and dc, the same, reads it.
// A nil dc is the default data converter.
func DescribeStateWith(ctx context.Context, c Describer, dc converter.DataConverter, workflowID string) (MemoState, error) {
	d, err := c.DescribeWorkflow(ctx, workflowID, "")
	if err != nil {
		return MemoState{}, fmt.Errorf("temporal: describing %s: %w", workflowID, err)
	}
	p, ok := d.Memo.GetFields()[MemoKey]
	if !ok {
		return MemoState{}, fmt.Errorf("temporal: %s: %w", workflowID, ErrNoMemoState)
	}
	if dc == nil {
		if !plainJSON(p) {
			return MemoState{}, fmt.Errorf("temporal: %s: the memo's %s is encoded as %.80q, not JSON: read it with the workers' data converter (DescribeStateWith)",
				workflowID, MemoKey, p.GetMetadata()[converter.MetadataEncoding])
		}
		dc = converter.GetDefaultDataConverter()
	}
	var m MemoState
	if err := dc.FromPayload(p, &m); err != nil {
		return MemoState{}, fmt.Errorf("temporal: %s: the memo's %s: %w", workflowID, MemoKey, err)
	}
	switch d.Status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
	default:
		m.Ended = true
	}
	return m, nil
}
