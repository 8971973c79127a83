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
	raw, err := os.ReadFile(filepath.Join("testdata", "histories", "v1", "transient.json"))
	require.NoError(t, err)
	var doc struct {
		Events []map[string]any `json:"events"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	payload := func(json string) map[string]any {
		return map[string]any{"payloads": []any{map[string]any{
			"metadata": map[string]any{"encoding": base64.StdEncoding.EncodeToString([]byte("json/plain"))},
			"data":     base64.StdEncoding.EncodeToString([]byte(json)),
		}}}
	}
	marker := map[string]any{"eventType": "EVENT_TYPE_MARKER_RECORDED", "markerRecordedEventAttributes": map[string]any{
		"markerName": "Version", "workflowTaskCompletedEventId": "4",
		"details": map[string]any{"change-id": payload(`"history-order"`), "version": payload("1")},
	}}
	// GetVersion upserts the TemporalChangeVersion search attribute with
	// its marker.
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	upsert := map[string]any{"eventType": "EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES", "upsertWorkflowSearchAttributesEventAttributes": map[string]any{
		"workflowTaskCompletedEventId": "4",
		"searchAttributes": map[string]any{"indexedFields": map[string]any{"TemporalChangeVersion": map[string]any{
			"metadata": map[string]any{"encoding": b64("json/plain"), "type": b64("KeywordList")},
			"data":     b64(`["history-order-1"]`),
		}}},
	}}
	signal := map[string]any{"eventType": "EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED", "workflowExecutionSignaledEventAttributes": map[string]any{
		"signalName": temporal.SignalAbortRetry,
		"input":      map[string]any{"payloads": []any{map[string]any{"metadata": map[string]any{"encoding": b64("binary/null")}}}},
	}}
	var events []map[string]any
	fired := false
	for _, e := range doc.Events {
		events = append(events, e)
		switch {
		case e["eventId"] == "4":
			events = append(events, marker, upsert)
		case e["eventType"] == "EVENT_TYPE_TIMER_FIRED" && !fired:
			fired = true
			events = append(events, signal)
		}
	}
	require.True(t, fired)
	// Number the events again: their IDs, the IDs that refer to them, and
	// the activity and timer IDs, which the SDK takes from the event IDs.
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
	r := worker.NewWorkflowReplayer()
	(&temporal.Workflow{}).Register(r)
	require.NoError(t, r.ReplayWorkflowHistory(nil, h), "the retry starts as recorded, abort_retry after it changes nothing")
}
