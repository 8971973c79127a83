package temporal_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/agentfsm/agentfsm/temporal"
)

// Issue 27 item 7: abort_retry that arrives after the backoff's timer
// fired, in the same workflow task (a worker that was down while both
// happened, then takes the task), is handled after it, as in process: the
// retry has started, abort_retry finds no wait to cancel, and the turn
// goes on. The workflow used to handle the signal first (its coroutine was
// made before the timer's) and cancel a retry that in process had
// started.
//
// The test environment delivers each timer and signal in a task of its
// own, so the history is the recorded transient story with the signal
// put right after the first TimerFired, and the history-order version
// marker in the first task, as a worker of this version records it.
func TestAbortRetryAfterTheTimerFiredInOneTask(t *testing.T) {
	fired := false
	h := craftHistory(t, filepath.Join("v1", "transient.json"), func(e historyEvent) []historyEvent {
		switch {
		case e["eventId"] == "4":
			return []historyEvent{e, versionMarker("history-order", "4"), versionUpsert("4", "history-order-1")}
		case e["eventType"] == "EVENT_TYPE_TIMER_FIRED" && !fired:
			fired = true
			return []historyEvent{e, signalEvent(temporal.SignalAbortRetry)}
		}
		return []historyEvent{e}
	})
	require.True(t, fired)
	r := worker.NewWorkflowReplayer()
	(&temporal.Workflow{}).Register(r)
	require.NoError(t, r.ReplayWorkflowHistory(nil, h), "the retry starts as recorded, abort_retry after it changes nothing")
}

// Issue 27 item 7, for the activities' results: abort_compaction that
// arrives after the summary's activity completed, in the same workflow
// task, is handled after the summary's result, as in process: the
// compaction has ended and the run started again, so abort_compaction
// finds nothing to abort and the turn goes on as recorded. The workflow
// used to handle the signal first (the signals' coroutine runs before the
// summary's), abort the compaction and fail the turn ("context overflow
// not recovered"), so the run recorded after the summary was never
// scheduled.
//
// The history is the recorded overflow story (v2, with the history-order
// marker) with the history-order-results marker in the first task, as a
// worker of this version records it, and the signal put right after the
// summary's ActivityTaskCompleted.
func TestAbortCompactionAfterTheSummaryEndedInOneTask(t *testing.T) {
	h, put := signalAfterActivity(t, "overflow.json", temporal.ActivitySummarize, 1, signalEvent(temporal.SignalAbortCompaction))
	require.True(t, put, "the overflow story has a summary")
	r := worker.NewWorkflowReplayer()
	(&temporal.Workflow{}).Register(r)
	require.NoError(t, r.ReplayWorkflowHistory(nil, h), "the run starts again after the summary as recorded, abort_compaction after it changes nothing")
}

// Issue 27 item 7, for a run's end: set_auto_compaction false that
// arrives after the activity of a run that overflowed completed, in the
// same workflow task, is handled after the run's end, as in process: the
// engine has already decided to compact, and the summary is scheduled as
// recorded. The workflow used to handle the signal first (the signals'
// coroutine runs before the run's), so the overflow found compaction off
// and failed the turn without a summary.
func TestAutoCompactionOffAfterTheRunEndedInOneTask(t *testing.T) {
	h, put := signalAfterActivity(t, "overflow.json", temporal.ActivityRun, 2, signalEvent(temporal.SignalSetAutoCompaction, "false"))
	require.True(t, put, "the overflow story has a second run")
	r := worker.NewWorkflowReplayer()
	(&temporal.Workflow{}).Register(r)
	require.NoError(t, r.ReplayWorkflowHistory(nil, h), "the summary is scheduled after the overflow as recorded, set_auto_compaction after it changes nothing this turn")
}

// Issue 27 item 7, for a step-wise run's end: set_auto_retry false that
// arrives after the activity of the model call that failed with a 503
// completed, in the same workflow task, is handled after the run's end,
// as in process: the engine has already decided to retry, and the
// backoff's timer starts as recorded (put before the model call's end,
// the signal makes the 503 fail the turn without a retry, and the replay
// fails). On this story the workflow without history-order-results got it
// right by chance: the recorded prompt came with the first workflow task,
// whose update handler starts the run's coroutine before the signals' is
// made, and coroutines run in the order they were made.
func TestAutoRetryOffAfterAStepFailedInOneTask(t *testing.T) {
	h, put := signalAfterActivity(t, "steps.json", temporal.ActivityModel, 2, signalEvent(temporal.SignalSetAutoRetry, "false"))
	require.True(t, put, "the steps story has a second model call")
	r := worker.NewWorkflowReplayer()
	(&temporal.Workflow{}).Register(r)
	require.NoError(t, r.ReplayWorkflowHistory(nil, h), "the retry's timer starts after the 503 as recorded, set_auto_retry after it changes nothing this turn")
}

// signalAfterActivity is the recorded story name (v2, with the
// history-order marker) with the history-order-results marker in the
// first workflow task, as a worker of this version records it, and sig put
// right after the ActivityTaskCompleted of the nth activity of type
// activity, in the same workflow task; put reports that it was.
func signalAfterActivity(t *testing.T, name, activity string, nth int, sig historyEvent) (h *historypb.History, put bool) {
	t.Helper()
	scheduled, n, marked := "", 0, false
	h = craftHistory(t, filepath.Join("v2", name), func(e historyEvent) []historyEvent {
		if a, ok := e["activityTaskScheduledEventAttributes"].(map[string]any); ok && a["activityType"].(map[string]any)["name"] == activity {
			if n++; n == nth {
				scheduled = e["eventId"].(string)
			}
		}
		if a, ok := e["activityTaskCompletedEventAttributes"].(map[string]any); ok && scheduled != "" && a["scheduledEventId"] == scheduled && !put {
			put = true
			return []historyEvent{e, sig}
		}
		if a, ok := e["upsertWorkflowSearchAttributesEventAttributes"].(map[string]any); ok && searchAttr(t, a) == `["history-order-1","continue-bound-1"]` {
			// Right after history-order's marker and upsert.
			marked = true
			return []historyEvent{e, versionMarker("history-order-results", "4"), versionUpsert("4", "history-order-results-1", "history-order-1", "continue-bound-1")}
		}
		return []historyEvent{e}
	})
	require.True(t, marked, "%s has the history-order marker", name)
	return h, put
}

// historyEvent is one event of a history in its JSON form.
type historyEvent = map[string]any

// craftHistory reads the recorded history name (under historiesDir),
// replaces each event by what edit returns for it, and numbers the events
// again: their IDs, the IDs that refer to them, and the activity and
// timer IDs, which the SDK takes from the event IDs. An added event
// without a time takes the one before it.
func craftHistory(t *testing.T, name string, edit func(historyEvent) []historyEvent) *historypb.History {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(historiesDir, name))
	require.NoError(t, err)
	var doc struct {
		Events []historyEvent `json:"events"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	var events []historyEvent
	for _, e := range doc.Events {
		events = append(events, edit(e)...)
	}
	renumber := map[string]string{}
	for i, e := range events {
		if id, ok := e["eventId"].(string); ok {
			renumber[id] = strconv.Itoa(i + 1)
		}
		e["eventId"] = strconv.Itoa(i + 1)
		if _, ok := e["eventTime"]; !ok {
			e["eventTime"] = events[i-1]["eventTime"]
		}
	}
	for _, e := range events {
		for k, v := range e {
			attrs, ok := v.(map[string]any)
			if !ok || !strings.HasSuffix(k, "Attributes") {
				continue
			}
			for ak, av := range attrs {
				if s, ok := av.(string); ok && (strings.HasSuffix(ak, "EventId") || ak == "activityId" || ak == "timerId") && renumber[s] != "" {
					attrs[ak] = renumber[s]
				}
			}
		}
	}
	doc.Events = events
	crafted, err := json.Marshal(doc)
	require.NoError(t, err)
	h, err := client.HistoryFromJSON(bytes.NewReader(crafted), client.HistoryJSONOptions{})
	require.NoError(t, err)
	return h
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// payloadOf is a JSON payload of json.
func payloadOf(json string) map[string]any {
	return map[string]any{"payloads": []any{map[string]any{
		"metadata": map[string]any{"encoding": b64("json/plain")},
		"data":     b64(json),
	}}}
}

// versionMarker is the marker workflow.GetVersion records for change ID
// id at version 1, in the workflow task completed as event completed.
func versionMarker(id, completed string) historyEvent {
	return historyEvent{"eventType": "EVENT_TYPE_MARKER_RECORDED", "markerRecordedEventAttributes": map[string]any{
		"markerName": "Version", "workflowTaskCompletedEventId": completed,
		"details": map[string]any{"change-id": payloadOf(strconv.Quote(id)), "version": payloadOf("1")},
	}}
}

// versionUpsert is the upsert of the TemporalChangeVersion search
// attribute that workflow.GetVersion records with its marker.
func versionUpsert(completed string, versions ...string) historyEvent {
	list, _ := json.Marshal(versions)
	return historyEvent{"eventType": "EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES", "upsertWorkflowSearchAttributesEventAttributes": map[string]any{
		"workflowTaskCompletedEventId": completed,
		"searchAttributes": map[string]any{"indexedFields": map[string]any{"TemporalChangeVersion": map[string]any{
			"metadata": map[string]any{"encoding": b64("json/plain"), "type": b64("KeywordList")},
			"data":     b64(string(list)),
		}}},
	}}
}

// signalEvent is signal name, sent without an argument, or with the JSON
// arg.
func signalEvent(name string, arg ...string) historyEvent {
	input := map[string]any{"payloads": []any{map[string]any{"metadata": map[string]any{"encoding": b64("binary/null")}}}}
	if len(arg) > 0 {
		input = payloadOf(arg[0])
	}
	return historyEvent{"eventType": "EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED", "workflowExecutionSignaledEventAttributes": map[string]any{
		"signalName": name,
		"input":      input,
	}}
}

// searchAttr is the TemporalChangeVersion an upsert's attributes write.
func searchAttr(t *testing.T, attrs map[string]any) string {
	t.Helper()
	f := attrs["searchAttributes"].(map[string]any)["indexedFields"].(map[string]any)["TemporalChangeVersion"].(map[string]any)
	return string(decoded(t, f["data"].(string)))
}

func decoded(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}
