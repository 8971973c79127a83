package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// TestEventWireForms pins each event's line byte for byte (docs/rpc.md):
// "type" first, then the event's fields; and the line decodes back into the
// same event. The wire form is this package's: the events themselves are
// plain values. Issue item 5.
func TestEventWireForms(t *testing.T) {
	msg := transcript.Message{ID: "a", Role: "assistant", StopReason: "stop", Timestamp: 5}
	cases := []struct {
		ev   events.Event
		want string
	}{
		{events.AgentStart{}, `{"type":"agent_start"}`},
		{events.CallStart{}, `{"type":"turn_start"}`},
		{events.MessageStart{Message: msg}, `{"type":"message_start","message":{"id":"a","role":"assistant","content":[],"stopReason":"stop","timestamp":5}}`},
		{events.MessageEnd{Message: msg}, `{"type":"message_end","message":{"id":"a","role":"assistant","content":[],"stopReason":"stop","timestamp":5}}`},
		{events.MessageUpdate{Message: msg, Delta: events.Delta{Kind: "text", Index: 0, Text: "Hel"}},
			`{"type":"message_update","message":{"id":"a","role":"assistant","content":[],"stopReason":"stop","timestamp":5},"delta":{"kind":"text","contentIndex":0,"delta":"Hel"}}`},
		{events.CallEnd{}, `{"type":"turn_end"}`},
		{events.AgentEnd{Messages: []transcript.Message{msg}}, `{"type":"agent_end","messages":[{"id":"a","role":"assistant","content":[],"stopReason":"stop","timestamp":5}]}`},
		{events.AutoRetryStart{Attempt: 1, MaxAttempts: 3, DelayMs: 2000, ErrorMessage: "503 Service Unavailable"},
			`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"503 Service Unavailable"}`},
		{events.AutoRetryStart{Attempt: 2, MaxAttempts: 3, DelayMs: 0, ErrorMessage: "429 quota exceeded", ErrorClass: classify.UsageLimit,
			Provider: "anthropic", Model: "claude-sonnet-4-5", Credential: "work"},
			`{"type":"auto_retry_start","attempt":2,"maxAttempts":3,"delayMs":0,"errorMessage":"429 quota exceeded","errorClass":"usage_limit","provider":"anthropic","model":"claude-sonnet-4-5","credentialId":"work"}`},
		{events.AutoRetryStart{Attempt: 1, MaxAttempts: 3, DelayMs: 3000, ErrorMessage: "usage limit reached", ErrorClass: classify.UsageLimit,
			ResetAt: time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)},
			`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":3000,"errorMessage":"usage limit reached","errorClass":"usage_limit","resetAt":"2026-12-01T15:00:00.000Z","resetAtMs":1796137200000}`},
		{events.AutoRetryEnd{Success: true, Attempt: 1, Outcome: events.RetryRecovered, ResetWait: true},
			`{"type":"auto_retry_end","success":true,"attempt":1,"outcome":"recovered","resetWait":true}`},
		{events.AutoRetryEnd{Success: true, Attempt: 1}, `{"type":"auto_retry_end","success":true,"attempt":1}`},
		{events.AutoRetryEnd{Success: true, Attempt: 1, Outcome: events.RetryRecovered}, `{"type":"auto_retry_end","success":true,"attempt":1,"outcome":"recovered"}`},
		{events.AutoRetryEnd{Success: false, Attempt: 3, FinalError: "503 Service Unavailable"},
			`{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"503 Service Unavailable"}`},
		{events.AutoRetryEnd{Success: false, Attempt: 3, FinalError: "503 Service Unavailable", Outcome: events.RetryExhausted, ErrorClass: classify.Retryable},
			`{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"503 Service Unavailable","outcome":"exhausted","errorClass":"retryable"}`},
		{events.AutoCompactionStart{Reason: transcript.ReasonOverflow}, `{"type":"auto_compaction_start","reason":"overflow"}`},
		{events.AutoCompactionEnd{Result: &transcript.Compaction{Summary: "s", FirstKeptEntryID: "m-3", TokensBefore: 9}, WillRetry: true},
			`{"type":"auto_compaction_end","result":{"summary":"s","firstKeptEntryId":"m-3","tokensBefore":9},"aborted":false,"willRetry":true}`},
		{events.AutoCompactionEnd{ErrorMessage: "Auto-compaction failed: x"},
			`{"type":"auto_compaction_end","aborted":false,"willRetry":false,"errorMessage":"Auto-compaction failed: x"}`},
		{events.AutoCompactionEnd{Aborted: true}, `{"type":"auto_compaction_end","aborted":true,"willRetry":false}`},
		{events.StateChange{From: "classifying", To: "backoff", Trigger: "retry"}, `{"type":"state_change","from":"classifying","to":"backoff","event":"retry"}`},
		{events.TurnSettled{}, `{"type":"turn_settled","success":true}`},
		{events.EventsDropped{Count: 4}, `{"type":"events_dropped","count":4}`},
		{events.ModelFallback{From: "claude-opus-4-5", To: "claude-sonnet-4-5", Reason: events.FallbackOverloaded, Until: time.Date(2026, 12, 1, 15, 5, 0, 0, time.UTC)},
			`{"type":"model_fallback","from":"claude-opus-4-5","to":"claude-sonnet-4-5","reason":"overloaded","until":"2026-12-01T15:05:00.000Z","untilMs":1796137500000}`},
		{events.ModelRevert{From: "claude-sonnet-4-5", To: "claude-opus-4-5"}, `{"type":"model_revert","from":"claude-sonnet-4-5","to":"claude-opus-4-5"}`},
		{events.SharedLimitWait{Key: "anthropic/work", Until: time.UnixMilli(1767225602000).UTC(), Reason: "rate_limited"},
			`{"type":"shared_limit_wait","key":"anthropic/work","until":"2026-01-01T00:00:02.000Z","untilMs":1767225602000,"reason":"rate_limited"}`},
	}
	for _, c := range cases {
		b, err := marshalEvent(c.ev)
		require.NoError(t, err)
		assert.Equal(t, c.want, string(b))
		typ := EventType(c.ev)
		assert.Regexp(t, `^\{"type":"`+typ+`"`, string(b), "type comes first")
		back, err := Event{Type: typ, Raw: b}.Value()
		require.NoError(t, err)
		assert.Equal(t, c.ev, back, typ)
	}

	// An agent_end without messages has an empty list.
	b, err := marshalEvent(events.AgentEnd{})
	require.NoError(t, err)
	assert.Equal(t, `{"type":"agent_end","messages":[]}`, string(b))

	// A failed turn's error goes as its text.
	b, err = marshalEvent(events.TurnSettled{Err: errors.New("session: aborted")})
	require.NoError(t, err)
	assert.Equal(t, `{"type":"turn_settled","success":false,"error":"session: aborted"}`, string(b))
	// With the class of the provider's error that failed it.
	b, err = marshalEvent(events.TurnSettled{Err: fmt.Errorf("%w: 400 bad request", policy.ErrProvider), ErrorClass: classify.Fatal})
	require.NoError(t, err)
	assert.Equal(t, `{"type":"turn_settled","success":false,"error":"session: provider error: 400 bad request","code":"provider","errorClass":"fatal"}`, string(b))
	back, err := Event{Type: "turn_settled", Raw: b}.Value()
	require.NoError(t, err)
	assert.Equal(t, classify.Fatal, back.(events.TurnSettled).ErrorClass)

	// A compaction's result goes without its reason, with the summarizer's
	// details.
	res := transcript.Compaction{Reason: transcript.ReasonOverflow, Summary: "s", FirstKeptEntryID: "m-3", TokensBefore: 9, Details: map[string]any{"n": 1.0}}
	b, err = marshalEvent(events.AutoCompactionEnd{Result: &res, WillRetry: true})
	require.NoError(t, err)
	assert.Equal(t, `{"type":"auto_compaction_end","result":{"summary":"s","firstKeptEntryId":"m-3","tokensBefore":9,"details":{"n":1}},"aborted":false,"willRetry":true}`, string(b))
	back, err = Event{Type: "auto_compaction_end", Raw: b}.Value()
	require.NoError(t, err)
	res.Reason = ""
	assert.Equal(t, events.AutoCompactionEnd{Result: &res, WillRetry: true}, back)

	// The retry events' facts are optional: a line without them (an older
	// server's) reads back without them, and a class or an outcome this
	// client does not know (a newer server's) does not make the line
	// unreadable: the class reads as none, the outcome as sent.
	back, err = Event{Type: "auto_retry_start", Raw: []byte(`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":5,"errorMessage":"x","errorClass":"cosmic_ray"}`)}.Value()
	require.NoError(t, err)
	assert.Equal(t, events.AutoRetryStart{Attempt: 1, MaxAttempts: 3, DelayMs: 5, ErrorMessage: "x"}, back)
	back, err = Event{Type: "auto_retry_end", Raw: []byte(`{"type":"auto_retry_end","success":false,"attempt":1,"outcome":"vanished","errorClass":"cosmic_ray"}`)}.Value()
	require.NoError(t, err)
	assert.Equal(t, events.AutoRetryEnd{Attempt: 1, Outcome: "vanished"}, back)
	_, err = marshalEvent(events.AutoRetryStart{ErrorClass: classify.Class(99)})
	assert.ErrorContains(t, err, "classify: invalid class 99")

	_, err = marshalEvent(nil)
	assert.ErrorContains(t, err, "rpc: not a session event")
	assert.Empty(t, EventType(nil))
	_, err = Event{Type: "warp", Raw: []byte(`{"type":"warp"}`)}.Value()
	assert.ErrorContains(t, err, `rpc: unknown event type "warp"`)
	_, err = Event{Type: "auto_retry_start", Raw: []byte(`{"type":"auto_retry_start","attempt":"one"}`)}.Value()
	assert.ErrorContains(t, err, "rpc: decoding auto_retry_start")
}

// TestTurnSettledErrorCodes: each sentinel error of a failed turn goes out
// as its code beside its text (its wire text, "session:"), and comes back
// as an error with that text
// that matches the same sentinels (an exhausted chain's ErrProvider too).
// An error of no sentinel has no code, and an unknown code matches nothing.
// Issue item 5.
func TestTurnSettledErrorCodes(t *testing.T) {
	cause := errors.New("dial tcp: connection refused")
	cases := []struct {
		err   error
		code  string
		match []error
	}{
		{&policy.ExhaustedError{Attempts: 3, Last: "503", Err: cause}, "exhausted", []error{policy.ErrExhausted, policy.ErrProvider}},
		{policy.ErrRetryCancelled, "retry_cancelled", []error{policy.ErrRetryCancelled}},
		{fmt.Errorf("%w: %w", policy.ErrAborted, context.Canceled), "aborted", []error{policy.ErrAborted}},
		{fmt.Errorf("%w: %w", policy.ErrOverflow, policy.ErrCompactionCancelled), "overflow", []error{policy.ErrOverflow}},
		{fmt.Errorf("%w: %w", policy.ErrStartFailed, cause), "start_failed", []error{policy.ErrStartFailed}},
		{fmt.Errorf("%w: %w", policy.ErrHistory, cause), "history", []error{policy.ErrHistory}},
		{fmt.Errorf("%w: 400 bad request", policy.ErrProvider), "provider", []error{policy.ErrProvider}},
		// The provider's Go error wraps a sentinel of its own: the turn's
		// own sentinel, nearer the top, names the code.
		{&policy.ExhaustedError{Attempts: 1, Last: "x", Err: fmt.Errorf("%w", policy.ErrAborted)}, "exhausted", []error{policy.ErrExhausted, policy.ErrProvider}},
		{fmt.Errorf("%w: %w", policy.ErrProvider, fmt.Errorf("agent: %w", policy.ErrAborted)), "provider", []error{policy.ErrProvider}},
	}
	all := []error{policy.ErrExhausted, policy.ErrRetryCancelled, policy.ErrAborted, policy.ErrOverflow,
		policy.ErrStartFailed, policy.ErrHistory, policy.ErrProvider}
	for _, c := range cases {
		b, err := marshalEvent(events.TurnSettled{Err: c.err})
		require.NoError(t, err)
		onWire := wireText(c.err.Error())
		assert.True(t, strings.HasPrefix(onWire, "session: "), onWire)
		text, _ := json.Marshal(onWire)
		assert.Equal(t, `{"type":"turn_settled","success":false,"error":`+string(text)+`,"code":"`+c.code+`"}`, string(b))
		v, err := Event{Type: "turn_settled", Raw: b}.Value()
		require.NoError(t, err)
		back := v.(events.TurnSettled).Err
		require.Error(t, back)
		assert.Equal(t, onWire, back.Error())
		for _, s := range all {
			assert.Equal(t, slices.Contains(c.match, s), errors.Is(back, s), "%s: %v", c.code, s)
		}
	}

	b, err := marshalEvent(events.TurnSettled{Err: cause})
	require.NoError(t, err)
	assert.Equal(t, `{"type":"turn_settled","success":false,"error":"dial tcp: connection refused"}`, string(b), "no code")
	v, err := Event{Type: "turn_settled", Raw: []byte(`{"type":"turn_settled","success":false,"error":"x","code":"melted"}`)}.Value()
	require.NoError(t, err)
	back := v.(events.TurnSettled).Err
	assert.EqualError(t, back, "x")
	for _, s := range all {
		assert.NotErrorIs(t, back, s)
	}
}

// TestPolicyErrorTextsOnTheWire: a policy error's text goes out with the
// "session:" it has always had on the wire, where it stands first in a
// turn's or a response's error and after the prefix of a failed
// compaction's errorMessage; any other text, and a "policy:" further in,
// goes as it is.
func TestPolicyErrorTextsOnTheWire(t *testing.T) {
	cases := []struct{ in, want string }{
		{policy.ErrBusy.Error(), "session: busy: a turn is in flight"},
		{policy.ErrClosed.Error(), "session: closed"},
		{policy.ErrAlreadyCompacted.Error(), "session: already compacted"},
		{policy.ErrNothingToCompact.Error(), "session: nothing to compact"},
		{policy.ErrCompactionCancelled.Error(), "session: compaction cancelled"},
		{policy.ErrAborted.Error(), "session: aborted"},
		{policy.ErrRetryCancelled.Error(), "session: retry cancelled"},
		{(&policy.ExhaustedError{Attempts: 3, Last: "503"}).Error(), "session: retries exhausted after 3 attempts: 503"},
		{fmt.Errorf("%w: 400 bad request", policy.ErrProvider).Error(), "session: provider error: 400 bad request"},
		{fmt.Errorf("%w: %w", policy.ErrOverflow, errors.New("prompt is too long")).Error(), "session: context overflow not recovered: prompt is too long"},
		{fmt.Errorf("%w: disk full", policy.ErrHistory).Error(), "session: history write failed: disk full"},
		{fmt.Errorf("%w: dial tcp", policy.ErrStartFailed).Error(), "session: run could not start: dial tcp"},
		{"Auto-compaction failed: " + policy.ErrNothingToCompact.Error(), "Auto-compaction failed: session: nothing to compact"},
		{"Context overflow recovery failed: " + fmt.Errorf("%w: disk full", policy.ErrHistory).Error(), "Context overflow recovery failed: session: history write failed: disk full"},
		// A policy error that wraps another: both read as the session's.
		{fmt.Errorf("%w: %w", policy.ErrOverflow, policy.ErrNothingToCompact).Error(), "session: context overflow not recovered: session: nothing to compact"},
		{fmt.Errorf("%w: %w", policy.ErrOverflow, policy.ErrCompactionCancelled).Error(), "session: context overflow not recovered: session: compaction cancelled"},
		{fmt.Errorf("%w: %w", policy.ErrOverflow, fmt.Errorf("%w: disk full", policy.ErrHistory)).Error(),
			"session: context overflow not recovered: session: history write failed: disk full"},
		{fmt.Errorf("%w: %w", policy.ErrStartFailed, policy.ErrClosed).Error(), "session: run could not start: session: closed"},
		// What follows a provider error is the provider's text, as it is.
		{fmt.Errorf("%w: policy: aborted", policy.ErrProvider).Error(), "session: provider error: policy: aborted"},
		{(&policy.ExhaustedError{Attempts: 1, Last: "policy: aborted"}).Error(), "session: retries exhausted after 1 attempts: policy: aborted"},
		// Not the policy's: as it is.
		{"policy: something else", "policy: something else"},
		{"session: the summary's model call failed", "session: the summary's model call failed"},
		{"Auto-compaction failed: policy: the summary's details cannot be written as JSON", "Auto-compaction failed: policy: the summary's details cannot be written as JSON"},
		{"503 policy: busy: a turn is in flight", "503 policy: busy: a turn is in flight"},
		{"", ""},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, wireText(c.in), c.in)
	}
	// A cause that is itself a long chain of policy texts (an agent's start
	// error can say anything) is mapped in one pass, not one copy per link.
	n := 1 << 16
	assert.Equal(t, strings.Repeat("session: run could not start: ", n)+"x", wireText(strings.Repeat("policy: run could not start: ", n)+"x"))

	b, err := marshalEvent(events.TurnSettled{Err: policy.ErrAborted})
	require.NoError(t, err)
	assert.Equal(t, `{"type":"turn_settled","success":false,"error":"session: aborted","code":"aborted"}`, string(b))
	back, err := Event{Type: "turn_settled", Raw: b}.Value()
	require.NoError(t, err)
	assert.ErrorIs(t, back.(events.TurnSettled).Err, policy.ErrAborted)

	b, err = marshalEvent(events.AutoCompactionEnd{ErrorMessage: "Auto-compaction failed: " + policy.ErrNothingToCompact.Error()})
	require.NoError(t, err)
	assert.Equal(t, `{"type":"auto_compaction_end","aborted":false,"willRetry":false,"errorMessage":"Auto-compaction failed: session: nothing to compact"}`, string(b))
}
