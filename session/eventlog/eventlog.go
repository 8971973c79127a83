package eventlog

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/transcript"
)

// LevelTrace is the level of the lines finer than debug: a message_update
// for every fragment of a streamed message.
const LevelTrace = slog.LevelDebug - 4

// The attribute names. They are stable: a change is a breaking change.
const (
	KeySession     = "session.id"
	KeyStateFrom   = "state.from"
	KeyStateTo     = "state.to"
	KeyStateEvent  = "state.event"
	KeyAttempt     = "retry.attempt"
	KeyMaxAttempts = "retry.max_attempts"
	KeyDelay       = "retry.delay"
	KeyRetryOut    = "retry.outcome"
	KeyErrorClass  = "error.class"
	KeyErrorCode   = "error.code"
	KeyErrorText   = "error.message"
	KeyProvider    = "provider"
	KeyModel       = "model"
	KeyCredential  = "credential.id"
	KeyReason      = "compaction.reason"
	KeyCompactOut  = "compaction.outcome"
	KeyTokensIn    = "compaction.tokens_before"
	KeyWillRetry   = "compaction.will_retry"
	KeySummary     = "compaction.summary"
	KeyTurnOut     = "turn.outcome"
	KeyMessageID   = "message.id"
	KeyRole        = "message.role"
	KeyStopReason  = "message.stop_reason"
	KeyText        = "message.text"
	KeyMessages    = "messages"
	KeyInput       = "usage.input_tokens"
	KeyOutput      = "usage.output_tokens"
	KeyDeltaKind   = "delta.kind"
	KeyDeltaIndex  = "delta.index"
	KeyDeltaText   = "delta.text"
	KeyDropped     = "dropped.count"
	// The model fallback's (model_fallback, model_revert): the model left,
	// the model taken, why, and when the cooldown ends.
	KeyFallbackFrom   = "fallback.from"
	KeyFallbackTo     = "fallback.to"
	KeyFallbackReason = "fallback.reason"
	KeyFallbackUntil  = "fallback.until"
)

// Option configures Subscribe.
type Option func(*logger)

// WithContent adds the content of messages to the lines: a message's text,
// a delta's fragment, a compaction's summary. Without it, none is logged.
func WithContent() Option { return func(lg *logger) { lg.content = true } }

// Subscribe logs every event of s to l, from now on, until the returned
// function is called. Each line's message is the event's wire type
// (rpc.EventType: "auto_retry_start", ...) and every line has s's ID as
// KeySession; a nil l, or one without a handler (the zero slog.Logger), is
// slog.Default(). It is an ordinary subscriber (Session.Subscribe): it logs
// on a goroutine of its own, in order, and a slow handler delays only it; a
// handler that panics, or calls runtime.Goexit, loses that line (the
// session recovers it, and reports it to its own logger, see
// session.WithLogger) and the next events are still logged. As any plain
// subscriber's function, the handler must not call s's Flush or Close: they
// would wait for the handler itself (see Session.Subscribe).
func Subscribe(s *session.Session, l *slog.Logger, opts ...Option) (unsubscribe func()) {
	if l == nil || l.Handler() == nil {
		l = slog.Default()
	}
	lg := &logger{l: l.With(KeySession, s.ID())}
	for _, o := range opts {
		o(lg)
	}
	return s.Subscribe(lg.log)
}

// logger is one subscription's state: the reason of the automatic
// compaction in progress, which its end does not repeat.
type logger struct {
	l       *slog.Logger
	content bool
	reason  transcript.CompactionReason
}

func (lg *logger) log(ev events.Event) {
	if c, ok := ev.(events.AutoCompactionStart); ok {
		lg.reason = c.Reason
	}
	level := levelOf(ev)
	ctx := context.Background()
	if !lg.l.Enabled(ctx, level) {
		return
	}
	lg.l.LogAttrs(ctx, level, rpc.EventType(ev), lg.attrs(ev)...)
}

// levelOf is the level ev is logged at.
func levelOf(ev events.Event) slog.Level {
	switch e := ev.(type) {
	case events.MessageUpdate:
		return LevelTrace
	case events.AutoRetryStart, events.EventsDropped, events.ModelFallback:
		return slog.LevelWarn
	case events.AutoRetryEnd:
		switch {
		case e.Success, e.Outcome == events.RetryCancelled:
			return slog.LevelInfo
		case e.Outcome == events.RetryFailed:
			// An error that is not retried ended it: the turn's own
			// line says whether the turn failed.
			return slog.LevelWarn
		default:
			return slog.LevelError
		}
	case events.AutoCompactionStart, events.ModelRevert:
		return slog.LevelInfo
	case events.AutoCompactionEnd:
		if e.Result == nil && !e.Aborted {
			return slog.LevelError
		}
		return slog.LevelInfo
	case events.TurnSettled:
		if e.Err == nil {
			return slog.LevelInfo
		}
		switch rpc.ErrorCode(e.Err) {
		case "aborted", "retry_cancelled":
			return slog.LevelInfo // the user's doing
		}
		return slog.LevelError
	}
	return slog.LevelDebug
}

// attrs are ev's attributes, less the session's.
func (lg *logger) attrs(ev events.Event) []slog.Attr {
	var a []slog.Attr
	add := func(more ...slog.Attr) { a = append(a, more...) }
	nonEmpty := func(key, v string) {
		if v != "" {
			add(slog.String(key, v))
		}
	}
	class := func(c classify.Class) {
		if c != classify.None {
			add(slog.String(KeyErrorClass, c.String()))
		}
	}
	switch e := ev.(type) {
	case events.StateChange:
		add(slog.String(KeyStateFrom, string(e.From)), slog.String(KeyStateTo, string(e.To)), slog.String(KeyStateEvent, string(e.Trigger)))
	case events.AutoRetryStart:
		add(slog.Int(KeyAttempt, e.Attempt), slog.Int(KeyMaxAttempts, e.MaxAttempts),
			slog.Duration(KeyDelay, time.Duration(e.DelayMs)*time.Millisecond))
		class(e.ErrorClass)
		nonEmpty(KeyErrorText, e.ErrorMessage)
		nonEmpty(KeyProvider, e.Provider)
		nonEmpty(KeyModel, e.Model)
		nonEmpty(KeyCredential, e.Credential)
	case events.AutoRetryEnd:
		add(slog.Int(KeyAttempt, e.Attempt))
		nonEmpty(KeyRetryOut, string(e.Outcome))
		class(e.ErrorClass)
		nonEmpty(KeyErrorText, e.FinalError)
	case events.AutoCompactionStart:
		add(slog.String(KeyReason, string(e.Reason)))
	case events.AutoCompactionEnd:
		nonEmpty(KeyReason, string(lg.reason))
		switch {
		case e.Result != nil:
			add(slog.String(KeyCompactOut, "compacted"), slog.Int(KeyTokensIn, e.Result.TokensBefore))
			if lg.content {
				add(slog.String(KeySummary, e.Result.Summary))
			}
		case e.Aborted:
			add(slog.String(KeyCompactOut, "aborted"))
		default:
			add(slog.String(KeyCompactOut, "failed"))
		}
		add(slog.Bool(KeyWillRetry, e.WillRetry))
		nonEmpty(KeyErrorText, e.ErrorMessage)
		lg.reason = ""
	case events.TurnSettled:
		if e.Err == nil {
			add(slog.String(KeyTurnOut, "success"))
			break
		}
		add(slog.String(KeyTurnOut, "failed"))
		nonEmpty(KeyErrorCode, rpc.ErrorCode(e.Err))
		add(slog.String(KeyErrorText, e.Err.Error()))
	case events.MessageStart:
		add(slog.String(KeyRole, string(e.Message.Role)))
	case events.MessageEnd:
		a = lg.message(a, e.Message)
	case events.MessageUpdate:
		add(slog.String(KeyDeltaKind, e.Delta.Kind), slog.Int(KeyDeltaIndex, e.Delta.Index))
		if lg.content {
			add(slog.String(KeyDeltaText, e.Delta.Text))
		}
	case events.AgentEnd:
		add(slog.Int(KeyMessages, len(e.Messages)))
	case events.EventsDropped:
		add(slog.Int(KeyDropped, e.Count))
	case events.ModelFallback:
		add(slog.String(KeyFallbackFrom, e.From), slog.String(KeyFallbackTo, e.To), slog.String(KeyFallbackReason, string(e.Reason)),
			slog.Time(KeyFallbackUntil, e.Until))
	case events.ModelRevert:
		add(slog.String(KeyFallbackFrom, e.From), slog.String(KeyFallbackTo, e.To))
	}
	return a
}

// message appends a finished message's attributes to a.
func (lg *logger) message(a []slog.Attr, m transcript.Message) []slog.Attr {
	a = append(a, slog.String(KeyMessageID, m.ID), slog.String(KeyRole, string(m.Role)))
	if m.StopReason != "" {
		a = append(a, slog.String(KeyStopReason, string(m.StopReason)))
	}
	if m.ErrorMessage != "" {
		a = append(a, slog.String(KeyErrorText, m.ErrorMessage))
	}
	if m.Provider != "" {
		a = append(a, slog.String(KeyProvider, m.Provider))
	}
	if m.Model != "" {
		a = append(a, slog.String(KeyModel, m.Model))
	}
	if m.Usage != nil {
		a = append(a, slog.Int(KeyInput, m.Usage.Input), slog.Int(KeyOutput, m.Usage.Output))
	}
	if text := m.Text(); lg.content && text != "" {
		a = append(a, slog.String(KeyText, text))
	}
	return a
}
