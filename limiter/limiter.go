// Package limiter holds a limit shared by the sessions of a process
// (docs/policy.md §3.10): what one session learns of its provider — a 429
// or a 529 that says when to come back, or overload failures that open a
// circuit — makes every session on the same provider and credential wait
// instead of calling. A session consults it before each run and tells it
// how each run ended (session.WithLimiter); the session's policy turns a
// hold into a wait in its backoff state (rule wait_shared).
//
// The circuit of each key is a failsafe-go circuit breaker
// (github.com/failsafe-go/failsafe-go/circuitbreaker): closed, open after
// FailureThreshold overload failures within Window, half-open after OpenFor
// with one probe, closed again when the probe succeeds and open again when
// it fails. The policy core does not import it.
package limiter

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/transcript"
)

// The reasons a key is held, as Admit and the shared_limit_wait event
// name them.
const (
	// RateLimited: a run on the key was rate limited (HTTP 429, a rate
	// limit or usage limit error) with a retry hint.
	RateLimited = "rate_limited"
	// Overloaded: a run on the key found the provider overloaded (HTTP
	// 529 or 503, overloaded_error) with a retry hint.
	Overloaded = "overloaded"
	// CircuitOpen: overload failures on the key opened its circuit.
	CircuitOpen = "circuit_open"
	// Probe: the key's circuit is half-open and another run is its one
	// probe.
	Probe = "probe"
)

// Config is a Limiter's settings. The zero value of a field means its
// default.
type Config struct {
	// FailureThreshold is how many overload failures (a 503 or 529, an
	// overloaded_error, an "overloaded" text; a 429 is a rate limit, not
	// an overload) on one
	// key within Window open its circuit: default 5. Negative: no circuit,
	// only the retry hints are shared.
	FailureThreshold int
	// Window is the period the failures are counted over: default 60 s.
	Window time.Duration
	// OpenFor is how long an open circuit holds its key before one probe
	// may go: default 30 s.
	OpenFor time.Duration
	// ProbeWait is how long a run waits while another is the half-open
	// circuit's probe, before it asks again: default 1 s.
	ProbeWait time.Duration
	// MaxHold bounds the hold a retry hint sets: a hint further away
	// holds the key this long (the next call learns the rest): default
	// 5 minutes.
	MaxHold time.Duration
}

// Limiter is a limit shared by the sessions of a process, keyed by
// provider and credential ID. It is safe for concurrent use. Its clock is
// the process's (time.Now), as the sessions' is. It forgets a key once
// the key holds nothing (no hint left, its circuit closed, no failure
// within Window), so a process that meets a new credential per user keeps
// only the keys that matter.
type Limiter struct {
	cfg  Config
	mu   sync.Mutex
	keys map[string]*key
	// sweepAt is how many keys the map holds when the next new key
	// first sweeps out the quiet ones (see get).
	sweepAt int
}

// minSweep is the fewest keys a Limiter holds before it sweeps.
const minSweep = 64

// key is what the limiter knows of one provider and credential.
type key struct {
	// until is when the retry hint the latest rate limit or overload
	// gave runs out, and reason which it was.
	until  time.Time
	reason string
	// lastFailure is when the latest overload failure was counted:
	// within Window of it the key's count still matters.
	lastFailure time.Time
	// breaker is the key's circuit; nil without one.
	breaker circuitbreaker.CircuitBreaker[any]
}

// New returns a Limiter with cfg's settings. It fails on a negative
// duration, naming the field.
func New(cfg Config) (*Limiter, error) {
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"Window", &cfg.Window, time.Minute}, {"OpenFor", &cfg.OpenFor, 30 * time.Second}, {"ProbeWait", &cfg.ProbeWait, time.Second}, {"MaxHold", &cfg.MaxHold, 5 * time.Minute}} {
		if *d.v < 0 {
			return nil, fmt.Errorf("limiter: negative %s %v", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if cfg.FailureThreshold == 0 {
		cfg.FailureThreshold = 5
	}
	return &Limiter{cfg: cfg, keys: map[string]*key{}, sweepAt: minSweep}, nil
}

// Key is the name of the key of provider and credential, as events name
// it: "provider/credential", or the provider alone without a credential.
func Key(provider, credential string) string {
	if credential == "" {
		return provider
	}
	return provider + "/" + credential
}

// get returns the key named k, made on first use. l.mu is held.
//
// A process whose sessions use many credentials over its life (one per
// user, say) must not keep every key it ever saw: before a new key joins a
// map that has grown to sweepAt keys, the quiet ones go, and sweepAt
// becomes twice what is left (at least minSweep). So the map holds at
// most about twice the keys that hold something, and a sweep costs
// nothing spread over the keys that grew the map.
func (l *Limiter) get(k string, now time.Time) *key {
	st := l.keys[k]
	if st == nil {
		if len(l.keys) >= l.sweepAt {
			for name, old := range l.keys {
				if l.quiet(old, now) {
					delete(l.keys, name)
				}
			}
			l.sweepAt = max(minSweep, 2*len(l.keys))
		}
		st = &key{}
		if l.cfg.FailureThreshold > 0 {
			st.breaker = circuitbreaker.NewBuilder[any]().
				WithFailureThresholdPeriod(uint(l.cfg.FailureThreshold), l.cfg.Window).
				WithDelay(l.cfg.OpenFor).
				WithSuccessThreshold(1).
				Build()
		}
		l.keys[k] = st
	}
	return st
}

// quiet reports whether st knows nothing a new key would not: no hold,
// and its circuit (if any) closed with no overload failure within Window.
// A quiet key can be forgotten.
func (l *Limiter) quiet(st *key, now time.Time) bool {
	if now.Before(st.until) {
		return false
	}
	return st.breaker == nil || st.breaker.IsClosed() && now.Sub(st.lastFailure) >= l.cfg.Window
}

// Admit asks whether a run on provider and credential may start now. It
// returns the zero time when it may: the run then holds a permit, and
// Done must follow, once, when it ends. Otherwise it returns until when
// the key is held, the key's name (Key) and why (RateLimited, Overloaded,
// CircuitOpen or Probe); the run must not call before then, and asks again
// then.
func (l *Limiter) Admit(provider, credential string) (until time.Time, name, reason string) {
	name = Key(provider, credential)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	st := l.get(name, now)
	if now.Before(st.until) {
		return st.until, name, st.reason
	}
	if st.breaker == nil || st.breaker.TryAcquirePermit() {
		return time.Time{}, name, ""
	}
	if d := st.breaker.RemainingDelay(); d > 0 {
		return now.Add(d), name, CircuitOpen
	}
	return now.Add(l.cfg.ProbeWait), name, Probe
}

// Done tells the limiter how a run Admit let start on provider and
// credential ended: last is its last assistant message, nil when it made
// no call. A rate limit or an overload with a retry hint holds the key
// until the hint runs out (at most MaxHold); an overload failure counts
// towards opening the key's circuit, and fails its probe; a message that
// is not an error (the provider answered) closes a half-open circuit. An
// aborted run, one that made no call, and any other error count for
// neither: they only give back the permit.
func (l *Limiter) Done(provider, credential string, last *transcript.Message) {
	name := Key(provider, credential)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	st := l.get(name, now)
	switch kind, hint := l.judge(last, now); kind {
	case success:
		if st.breaker != nil {
			st.breaker.RecordSuccess()
		}
	case overload, rateLimit:
		if hint > 0 {
			if until := now.Add(min(hint, l.cfg.MaxHold)); until.After(st.until) {
				st.until, st.reason = until, RateLimited
				if kind == overload {
					st.reason = Overloaded
				}
			}
		}
		if kind == overload && st.breaker != nil {
			st.breaker.RecordFailure()
			st.lastFailure = now
		} else {
			release(st.breaker)
		}
	default:
		release(st.breaker)
	}
}

// release gives back a permit without an outcome: a half-open circuit's
// probe that ended without telling anything lets another probe go. (A
// closed circuit keeps no permits; an open one gave none.) failsafe-go
// has no call for it: entering the half-open state anew does it.
func release(b circuitbreaker.CircuitBreaker[any]) {
	if b != nil && b.IsHalfOpen() {
		b.Close()
		b.HalfOpen()
	}
}

// What a run's end tells of its key.
const (
	nothing = iota
	success
	rateLimit
	overload
)

// judge says what last tells of its key, and the retry hint it carries
// (0 for none).
func (l *Limiter) judge(last *transcript.Message, now time.Time) (kind int, hint time.Duration) {
	if last == nil || last.StopReason == transcript.StopReasonAborted {
		return nothing, 0
	}
	if !last.IsError() {
		return success, 0
	}
	m := classify.Message{StopReason: last.StopReason, ErrorMessage: last.ErrorMessage, Status: last.HTTPStatus,
		ErrorType: last.ErrorType, Headers: last.Headers, Err: last.Err}
	// The extended rules: a run's last message is judged on its typed
	// facts first, and on network and overload wordings the seed lacks.
	res := classify.Extended.Classify(m, now)
	if res.Class != classify.Retryable && res.Class != classify.UsageLimit {
		return nothing, 0
	}
	if res.HasRetryAfter {
		hint = res.RetryAfter
	}
	switch {
	case last.HTTPStatus == 529 || last.HTTPStatus == 503 || last.ErrorType == "overloaded_error" ||
		strings.Contains(strings.ToLower(last.ErrorMessage), "overloaded"):
		return overload, hint
	case last.HTTPStatus == 429 || last.ErrorType == "rate_limit_error" || res.UsageLimit:
		return rateLimit, hint
	}
	return nothing, 0
}
