package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/internal/owned"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// Session runs an agent under the recovery policy: it retries transient
// errors with backoff, switches credentials on usage limits, and compacts
// the context on overflow or when it grows past its threshold. It is the
// in-process driver of a policy.Engine, which makes every decision: the
// Session carries out the engine's effects with a queue, one reusable
// timer, the agent's and the summarizer's goroutines, the history, the
// credential store and the subscribers.
//
// One goroutine at a time owns the engine; every method posts to it, so
// all methods are safe to call from any goroutine, a subscriber's
// included. Events reach subscribers in order, each subscriber on its own
// goroutine. Close a session when done with it.
//
// Go cannot tell one goroutine from another, so a session cannot tell by
// itself that a call comes from inside one of its callbacks. It hands every
// callback that may call back the session to call through instead: a
// subscriber receives it with each event (SubscribeSession), an observer
// and a log handler find it in their context (FromContext). Calls made
// through that value are known to be the callback's, and never wait for
// the callback itself; the same calls made through the *Session New
// returned are calls from outside, which wait as documented (see
// docs/session.md, "Calls from inside a callback").
type Session struct {
	*core
	// from is the subscriber whose calls this value makes
	// (SubscribeSession); loopCaller for the value observers and log
	// handlers on the session's own goroutine are handed (FromContext),
	// whose calls cannot wait for that goroutine (see onLoop); nil for any
	// other value.
	from *subscriber
}

// loopCaller is the from of the value a session hands its observers and
// log handlers: a mark, never a subscription.
var loopCaller = new(subscriber)

// onLoop reports whether s is the value observers and log handlers on the
// session's own goroutine are handed (FromContext).
func (s *Session) onLoop() bool { return s.from == loopCaller }

// core is a session's state, which every value calling it shares. It is
// kept within 512 bytes, a size class of Go's allocator, since each
// session waiting out a backoff keeps one (TestCoreSize).
type core struct {
	agent   Agent
	history history.History
	// settings are what the options chose that most sessions leave at
	// their defaults (shared by those sessions).
	*settings
	// secrets are the secrets the session's runs noted (NoteSecret).
	secrets *redactor
	// building is what the options chose for the engine, until New has
	// made the engine from it.
	*building

	// The loop: closures queued for the one goroutine that runs them. A
	// goroutine runs the queue only while it is not empty, so a session
	// that waits (for a prompt, or out a backoff on its timer) holds none.
	qmu       sync.Mutex
	queue     []func()
	done      chan struct{} // closed by Close, once the loop is stopped
	closeOnce sync.Once
	running   bool
	closed    bool
	// loopView is the value handed to the observers and to the log
	// handlers that the loop, the agent or the summarizer waits for (see
	// FromContext). It is held here, not made apart: one allocation less
	// for each session.
	loopView Session

	subs subscribers

	statusMu sync.Mutex
	status   policy.Status

	x executor // owned by the goroutine running the loop's queue
}

// settings are the options a session keeps that most sessions leave at
// their defaults: every such session shares defaultSettings, and one
// whose options change a setting gets a copy of its own (own). They are
// set only while New applies the options, and read-only afterwards.
type settings struct {
	creds      credentials.CredentialStore
	limiter    Limiter
	summarizer Summarizer
	random     func() float64
	logger     *slog.Logger
	observers  []Observer
}

// defaultSettings are the settings of a session given none of the options
// that change them. Never written: own copies it first.
var defaultSettings = settings{
	summarizer: policy.DigestSummarizer{},
	random:     mrand.Float64,
	logger:     discardLogger,
}

// own returns s's settings to write to, copying the shared defaults first.
func (s *Session) own() *settings {
	if s.settings == &defaultSettings {
		c := defaultSettings
		s.settings = &c
	}
	return s.settings
}

// building is what New makes the engine from: the setup the options
// chose, and the snapshot to restore (WithSnapshot), nil for none.
type building struct {
	setup   policy.Setup
	restore *policy.Snapshot
}

// Option configures New.
//
// An option given nil (a nil history.History, credentials.CredentialStore,
// Summarizer, random source, slog.Logger or Observer) is refused like any
// invalid option: New fails with an error that names it. To keep a default, leave the option
// out. An option applies only in New: called on a session New already
// returned, it returns an error that names it and changes nothing.
type Option func(*Session) error

// option is the Option named name that sets what set sets: an option
// applies only while New makes a session, so one called on a session New
// already returned (or on a nil one) fails with an error that names it,
// and changes nothing.
func option(name string, set func(*Session) error) Option {
	return func(s *Session) error {
		if s == nil || s.core == nil || s.building == nil {
			return fmt.Errorf("session: %s applies only in New, not to a session already made", name)
		}
		return set(s)
	}
}

// WithConfig sets the settings; the default is DefaultConfig. An invalid
// Config makes New fail.
func WithConfig(cfg policy.Config) Option {
	return option("WithConfig", func(s *Session) error {
		if err := cfg.Validate(); err != nil {
			return err
		}
		s.setup.Config = cfg
		return nil
	})
}

// WithModel sets the model the session talks to: its provider and ID (so a
// usage limit can switch credentials and an overflow can be told to be the
// current model's) and its context window. A provider, ID or base URL
// that is not valid UTF-8 makes New fail.
func WithModel(m policy.Model) Option {
	return option("WithModel", func(s *Session) error { s.setup.Model = m; return nil })
}

// WithSessionID sets the session's identity; the default is random. An ID
// that is empty or not valid UTF-8 makes New fail.
func WithSessionID(id string) Option {
	return option("WithSessionID", func(s *Session) error {
		if id == "" {
			return errors.New("session: empty session ID")
		}
		s.setup.SessionID = id
		return nil
	})
}

// WithHistory sets where the session's history is kept; the default is a
// MemoryHistory. A history has one session writing to it at a time. A
// session started on a history that has entries replays them, in order,
// into the runtime context the session that wrote them had when it last
// wrote (the latest compaction's summary, the messages it kept and those
// after it, less the ones removed), and gives its messages IDs that no
// entry there has. A nil h makes New fail, and so does a nil pointer or
// func in it, such as the *FileHistory of a history.OpenFileHistory that failed.
func WithHistory(h history.History) Option {
	return option("WithHistory", func(s *Session) error {
		if err := refuseNil(h, "History"); err != nil {
			return err
		}
		s.history = h
		return nil
	})
}

// WithRecoveryHistory has the session record in its history, when on,
// what it does to recover: each retry (its attempt, delay, the failed
// call's class and error, the credential and whether a usage limit
// switched it), a retry chain's end (its outcome, and the limit that ended
// an exhausted one), a failed automatic compaction and a failed turn, as
// entries of type transcript.EntryRecovery (see policy.Setup.Recovery).
// They change no runtime context; "agentfsm inspect" tells a session's
// story from them. Off (the default), the history holds messages, removals
// and compactions only.
func WithRecoveryHistory(on bool) Option {
	return option("WithRecoveryHistory", func(s *Session) error { s.setup.Recovery = on; return nil })
}

// WithCredentials sets the credential store used for usage limits; without
// one the usage-limit branch only waits. A nil c makes New fail (leave the
// option out for a session without credentials), and so does a nil pointer
// or func in it.
func WithCredentials(c credentials.CredentialStore) Option {
	return option("WithCredentials", func(s *Session) error {
		if err := refuseNil(c, "CredentialStore"); err != nil {
			return err
		}
		s.own().creds = c
		return nil
	})
}

// Limiter is a limit shared by the sessions of a process, keyed by
// provider and credential (docs/policy.md §3.10); package limiter's
// *Limiter is one. A session consults it before each run (Admit) and, for
// each run it admitted, tells it how the run ended (Done, once): last is
// the run's last assistant message, nil when it made none. A non-zero
// until from Admit holds the run: it makes no call, and the session waits
// in backoff until then (rule wait_shared, event shared_limit_wait naming
// key and reason) before it asks again. Both are called on the session's
// goroutine and must not block; one that panics is logged and admits the
// run.
type Limiter interface {
	Admit(provider, credential string) (until time.Time, key, reason string)
	Done(provider, credential string, last *transcript.Message)
}

// WithLimiter makes the session consult l, a limit it shares with the
// other sessions of the process given the same l, before each run. A nil
// l makes New fail (leave the option out for a session of its own), and
// so does a nil pointer or func in it.
func WithLimiter(l Limiter) Option {
	return option("WithLimiter", func(s *Session) error {
		if err := refuseNil(l, "Limiter"); err != nil {
			return err
		}
		s.own().limiter = l
		return nil
	})
}

// WithSummarizer sets the summarizer compactions use; the default is
// policy.DigestSummarizer{}. A nil sum makes New fail, and so does a nil pointer
// or func in it.
func WithSummarizer(sum Summarizer) Option {
	return option("WithSummarizer", func(s *Session) error {
		if err := refuseNil(sum, "Summarizer"); err != nil {
			return err
		}
		s.own().summarizer = sum
		return nil
	})
}

// WithRandom sets the source of the retry jitter: a function returning
// values in [0, 1). The default is math/rand/v2's Float64. A nil f makes
// New fail. f is called on the session's goroutine; one that panics is
// recovered and logged (WithLogger), and that draw is 0.
func WithRandom(f func() float64) Option {
	return option("WithRandom", func(s *Session) error {
		if f == nil {
			return errors.New("session: nil random source (WithRandom)")
		}
		s.own().random = f
		return nil
	})
}

// WithLogger sets where the session reports what it cannot return as an
// error: a panic it recovered in a subscriber, an agent, a summarizer, an
// observer, a credential store, a history or the random source; a
// runtime.Goexit in a subscriber, an agent or a summarizer; a history
// write that failed. The default discards; a nil l, or one without a
// handler (the zero slog.Logger) or with a nil pointer for one, makes New
// fail.
//
// The lines are logged at level Error, each on a goroutine of its own that
// the session waits for: a handler that panics, with any value, or calls
// runtime.Goexit loses that line and nothing else. The handler is called
// while the session's own goroutine, a subscriber's, or the agent's or the
// summarizer's waits for it: it must return, and calls back into the
// session through the value FromContext finds in the record's context
// (Handler.Handle's ctx). On it a line about a subscriber may Flush and
// Close as that subscriber would (SubscribeSession), and for any other
// line the methods that would wait for the waiting goroutine return
// ErrObserverCall or do nothing. Called on any other value, such as the
// one New returned, those methods may wait for ever.
func WithLogger(l *slog.Logger) Option {
	return option("WithLogger", func(s *Session) error {
		if l == nil {
			return errors.New("session: nil Logger")
		}
		if l.Handler() == nil {
			return errors.New("session: Logger with a nil Handler (a zero slog.Logger)")
		}
		if err := refuseNil(l.Handler(), "Handler"); err != nil {
			return fmt.Errorf("session: Logger with a %s", strings.TrimPrefix(err.Error(), "session: "))
		}
		s.own().logger = l
		return nil
	})
}

// WithSnapshot makes New restore the session a Snapshot was taken of, on its
// history (WithHistory): same identity, settings, state, attempt and
// backoff deadline (see policy.Restore: a run or compaction that was in
// flight is taken as interrupted). The snapshot's settings and session
// ID win over WithConfig and WithSessionID.
func WithSnapshot(snap policy.Snapshot) Option {
	return option("WithSnapshot", func(s *Session) error { s.restore = &snap; return nil })
}

var discardLogger = slog.New(slog.DiscardHandler)

// refuseNil returns the error for a nil v, the what an option or New was
// given: a nil interface, or a nil pointer or func in it, whose methods
// would dereference it or call it at their first use, perhaps on the
// session's goroutine. The error is "session: nil History", or with the
// type of the nil, "session: nil History (*history.FileHistory)".
func refuseNil(v any, what string) error {
	if v == nil {
		return fmt.Errorf("session: nil %s", what)
	}
	if rv := reflect.ValueOf(v); (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Func) && rv.IsNil() {
		return fmt.Errorf("session: nil %s (%T)", what, v)
	}
	return nil
}

// New starts a session that runs agent. It fails when agent is nil (or a
// nil pointer or func in the interface), an
// option is invalid, the history holds an invalid entry (transcript.ErrInvalidEntry)
// or the snapshot cannot be restored (policy.ErrSnapshot).
func New(agent Agent, opts ...Option) (*Session, error) {
	if err := refuseNil(agent, "Agent"); err != nil {
		return nil, err
	}
	s := &Session{core: &core{
		agent:    agent,
		history:  &history.MemoryHistory{},
		settings: &defaultSettings,
		secrets:  &redactor{},
		done:     make(chan struct{}),
		building: &building{setup: policy.Setup{Config: policy.DefaultConfig()}},
	}}
	s.loopView = Session{core: s.core, from: loopCaller}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	if s.setup.SessionID == "" {
		if s.restore != nil {
			s.setup.SessionID = s.restore.SessionID
		} else {
			var b [8]byte
			_, _ = rand.Read(b[:])
			s.setup.SessionID = hex.EncodeToString(b[:])
		}
	}
	s.setup.Credentials = s.creds != nil
	before, entries, err := history.Load(s.history)
	if err != nil {
		return nil, err
	}
	s.setup.Before, s.setup.History = before, entries
	var effects []policy.Effect
	if s.restore != nil {
		s.x.engine, effects, err = policy.Restore(s.setup, *s.restore, time.Now(), s.draw())
		if err == nil {
			s.setup.SessionID, s.setup.Config = s.restore.SessionID, s.restore.Config
		}
	} else {
		s.x.engine, err = policy.New(s.setup)
	}
	if err != nil {
		return nil, err
	}
	restoredTurn := s.restore != nil && s.restore.Turn
	s.building = nil // the entries read go with it
	if len(effects) > 0 || restoredTurn {
		// On the loop, which publishes the status: a restored backoff's
		// timer may fire, and the loop run, as soon as it is armed.
		_ = s.do(func() {
			if restoredTurn && len(s.observers) > 0 {
				s.startTurn(context.Background())
			}
			s.apply(effects)
		})
	} else {
		s.publish()
	}
	return s, nil
}

// ID returns the session's identity.
func (s *Session) ID() string { return s.x.engine.SessionID() }

// Model returns the session's model.
func (s *Session) Model() policy.Model { return s.x.engine.Model() }

// Subscribe calls fn with every event from now on, in order, one at a time,
// on a goroutine of the subscription's own: a slow fn delays only itself,
// and a panic in fn is recovered (and logged) without stopping the session
// or later events. It returns a function that ends the subscription: no
// call starts after it returns (one in progress may still finish). A nil
// fn subscribes nothing, and the function returned does nothing.
//
// fn may call every method of the session but Flush and Close. Those that
// wait (Prompt, a Send's channel, Abort, Compact) wait for the session's
// own work, never for fn's deliveries, so they return when called from fn
// too; meanwhile fn's later events wait in its queue (or, under
// WithBuffer, are dropped and counted). A turn in flight makes Prompt and
// Send return policy.ErrBusy, so fn cannot start a turn while handling an event
// of another one.
//
// fn must not call Flush or Close, nor wait for a goroutine that calls
// them: they wait until every subscriber, fn's own included, has received
// what was emitted before the call, so they would wait for fn to return,
// for ever. The session cannot tell such a call from one made by another
// goroutine while fn is merely slow, which must wait: Go gives a goroutine
// no identity. A subscriber that flushes or closes subscribes with
// SubscribeSession, and calls them on the session it is handed.
func (s *Session) Subscribe(fn func(events.Event), opts ...SubscribeOption) (unsubscribe func()) {
	if fn == nil {
		return func() {}
	}
	sub := &subscriber{fn: fn}
	sub.view = &Session{core: s.core, from: sub}
	return s.subscribe(sub, opts)
}

// SubscribeSession is Subscribe for a subscriber that calls back: fn is
// handed, with each event, the session to make its calls on, always the
// same value. It is the same session (any method may be called on it, from
// any goroutine, during fn's calls and after) except that its calls are
// taken to be this subscriber's: Flush and Close called on it never wait
// for this subscriber's deliveries (see Flush and Close), and so never for
// fn itself, nor for a goroutine fn waits for that makes them. They still
// wait for every other subscriber: a value must not be flushed or closed
// from another subscriber's function. A nil fn subscribes nothing, as
// for Subscribe.
func (s *Session) SubscribeSession(fn func(s *Session, ev events.Event), opts ...SubscribeOption) (unsubscribe func()) {
	if fn == nil {
		return func() {}
	}
	sub := &subscriber{}
	mine := &Session{core: s.core, from: sub}
	sub.fn = func(ev events.Event) { fn(mine, ev) }
	sub.view = mine
	return s.subscribe(sub, opts)
}

func (s *Session) subscribe(sub *subscriber, opts []SubscribeOption) (unsubscribe func()) {
	s.subs.add(sub, opts)
	var once sync.Once
	return func() { once.Do(func() { s.subs.remove(sub) }) }
}

// Flush returns once every subscriber has received every event emitted
// before the call (a subscriber that never returns keeps it waiting).
//
// Called on the value SubscribeSession hands a subscriber, Flush waits for
// every other subscriber, but not for that one: the events queued for it
// behind the one it is handling arrive after its function returns, in
// order. Nor does it wait for a subscriber on whose value a Flush or a
// Close was already in progress when the call began, since that one may
// be waiting for the caller. Called on the value an observer or a log
// handler finds in its context (FromContext), it returns at once: the
// subscribers may be waiting for the goroutine that waits for the caller.
// Called from a subscriber's function on any other value, it waits for
// that subscriber too, and so for ever (see Subscribe).
func (s *Session) Flush() {
	if s.onLoop() {
		return // the subscribers may be waiting for the loop
	}
	s.subs.flush(s.from)
}

// Prompt sends text as the user's next message and returns when the whole
// turn has settled: the run, every retry it triggers, and any overflow
// recovery with its continuation. After it returns, the session emits no
// event until the next call.
//
// It returns nil when the turn ended in a successful message, and otherwise
// an error matching one of package policy's ErrExhausted (a
// *policy.ExhaustedError), ErrRetryCancelled, ErrAborted, ErrOverflow,
// ErrProvider, ErrStartFailed, ErrHistory. A Prompt while another turn is
// in flight returns policy.ErrBusy at once. When ctx is done first, the
// turn is aborted and Prompt returns once it is quiet, with an error
// matching policy.ErrAborted and ctx's cause.
//
// ctx's values (never its deadline or cancellation) are the turn's: the
// agent's runs see them, and so do the observers (WithObserver), so that
// a span the caller started around Prompt is the parent of the turn's.
func (s *Session) Prompt(ctx context.Context, text string) error {
	settled, err := s.send(ctx, text)
	if err != nil {
		return err
	}
	select {
	case err := <-settled:
		return err
	case <-ctx.Done():
		s.abort(context.Cause(ctx))
		err := <-settled
		if errors.Is(err, policy.ErrAborted) {
			return fmt.Errorf("%w: %w", err, context.Cause(ctx))
		}
		return err
	}
}

// Send starts a turn with text as the user's next message and returns at
// once: with policy.ErrBusy (or policy.ErrClosed) when the turn cannot
// start, else with a channel that receives the turn's result, as Prompt
// would return it, once the whole turn has settled. It is Prompt for
// callers that must not block, such as a server acknowledging a command.
func (s *Session) Send(text string) (settled <-chan error, err error) {
	return s.send(context.Background(), text)
}

// send is Send for a turn whose context has ctx's values.
func (s *Session) send(ctx context.Context, text string) (<-chan error, error) {
	reply := make(chan error, 1)
	var busy error
	if err := s.do(func() {
		effects, err := s.x.engine.Prompt(time.Now(), text)
		if busy = err; err == nil {
			s.x.reply = reply
			s.x.turnCtx = withoutCancel(s.uncallerCtx(ctx))
			if len(s.observers) > 0 {
				s.startTurn(ctx)
			}
			s.apply(effects)
		}
	}); err != nil {
		return nil, err
	}
	if busy != nil {
		return nil, busy
	}
	return reply, nil
}

// AbortRetry cancels a pending retry wait: the chain ends with
// auto_retry_end "Retry cancelled" and the turn with policy.ErrRetryCancelled.
// With no wait pending it does nothing. It is safe to call at any time, any
// number of times, from any goroutine.
func (s *Session) AbortRetry() {
	_ = s.do(func() { s.apply(s.x.engine.AbortRetry(time.Now())) })
}

// Abort stops whatever the session is doing: it cancels a pending retry
// wait, the running model call and any running compaction, ends an active
// chain as cancelled, and fails the turn in flight with policy.ErrAborted. Nothing
// the cancelled run still reports can start a retry, a compaction or a
// continuation. Abort returns when the session is quiet (no run and no
// compaction in flight): at once, as long as the agent and the summarizer
// honour their contexts.
func (s *Session) Abort() {
	s.abort(policy.ErrAborted)
}

func (s *Session) abort(cause error) {
	var quiet chan struct{}
	if s.do(func() {
		s.apply(s.x.engine.Abort(time.Now(), cause))
		if s.x.quiet == nil {
			s.x.quiet = make(chan struct{})
		}
		quiet = s.x.quiet
	}) != nil {
		return
	}
	select {
	case <-quiet:
	case <-s.done:
	}
}

// AbortCompaction cancels a running compaction, automatic or manual. With
// none running it does nothing.
func (s *Session) AbortCompaction() {
	_ = s.do(func() { s.apply(s.x.engine.AbortCompaction(time.Now())) })
}

// Compact compacts the runtime context now: it summarizes all but the
// recent messages with the optional instructions and returns the result.
// It emits no automatic compaction events, only the machine's moves
// (state_change). While a run or a compaction is in flight it returns
// policy.ErrBusy and changes nothing; during a retry chain's wait it first
// ends the chain as cancelled (the turn waiting on it fails with
// policy.ErrRetryCancelled), then compacts. When ctx ends first the
// compaction is cancelled. Its errors match package policy's
// ErrNothingToCompact, ErrAlreadyCompacted, ErrCompactionCancelled,
// ErrBusy, ErrClosed, the summarizer's error, or the history's when the
// compaction's entry could not be written (the context is then
// unchanged).
func (s *Session) Compact(ctx context.Context, instructions string) (transcript.Compaction, error) {
	type answer struct {
		res transcript.Compaction
		err error
	}
	reply := make(chan answer, 1)
	started := false
	err := s.do(func() {
		effects, err := s.x.engine.Compact(time.Now(), instructions)
		if err == nil {
			started = true
			s.x.compact = func(res transcript.Compaction, err error) { reply <- answer{res, err} }
		}
		s.apply(effects)
		if err != nil {
			reply <- answer{err: err}
		}
	})
	if err != nil {
		return transcript.Compaction{}, err
	}
	select {
	case a := <-reply:
		return a.res, a.err
	case <-ctx.Done():
		// Cancel this call's compaction only, never another's. Until its
		// answer is in reply it is the one in flight: a manual compaction
		// ends with FinishCompact, which answers at once on this loop,
		// and no other compaction starts while it runs.
		_ = s.do(func() {
			if started && len(reply) == 0 {
				s.apply(s.x.engine.AbortCompaction(time.Now()))
			}
		})
		a := <-reply
		return a.res, a.err
	case <-s.done:
		return transcript.Compaction{}, policy.ErrClosed
	}
}

// SetAutoRetryEnabled writes retry.enabled; it takes effect at the next
// decision (a chain in progress ends there).
func (s *Session) SetAutoRetryEnabled(on bool) {
	_ = s.do(func() { s.x.engine.SetRetryEnabled(on) })
}

// SetAutoCompactionEnabled writes compaction.enabled.
func (s *Session) SetAutoCompactionEnabled(on bool) {
	_ = s.do(func() { s.x.engine.SetCompactionEnabled(on) })
}

// Config returns the session's current settings: those it was made with,
// as SetAutoRetryEnabled and SetAutoCompactionEnabled changed them. The
// value is the caller's: changing it changes nothing in the session.
func (s *Session) Config() policy.Config {
	var cfg policy.Config
	if s.do(func() { cfg = s.x.engine.Snapshot().Config }) != nil {
		return policy.Config{}
	}
	return cfg
}

// Status returns the session's whole observable state at once: the
// machine's state, the retry attempt, the settings, whether a run or a
// compaction is in flight, the size of the runtime context (see
// policy.Status). Read together, its fields never contradict each other;
// it is the one way to read any of them.
func (s *Session) Status() policy.Status {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	return s.status
}

// LastCompactionTruncated returns, with the Status it goes with, the tool
// results the latest compaction kept truncated (transcript.Compaction's
// Truncated), nil when none: read at once with that Status, so the two
// never describe different compactions.
func (s *Session) LastCompactionTruncated() (policy.Status, []transcript.Truncation) {
	var st policy.Status
	var out []transcript.Truncation
	if err := s.do(func() { st, out = s.x.engine.Status(), s.x.engine.LastCompactionTruncated() }); err != nil {
		return s.Status(), nil
	}
	return st, out
}

// Snapshot returns the session's engine as a serializable value, to restore
// it in another process with WithSnapshot and the same history. A snapshot
// taken with nothing in flight (idle, or waiting out a backoff) is restored
// exactly.
func (s *Session) Snapshot() (policy.Snapshot, error) {
	var snap policy.Snapshot
	err := s.do(func() { snap = s.x.engine.Snapshot() })
	return snap, err
}

// Messages returns a copy of the runtime context: the messages the next
// model call will see. The copy is the caller's, content blocks, tool
// arguments, usage and headers included: changing it changes nothing in
// the session.
func (s *Session) Messages() []transcript.Message {
	var out []transcript.Message
	if s.do(func() { out = s.x.engine.Messages() }) != nil {
		return nil
	}
	for i := range out {
		out[i] = owned.Message(out[i])
	}
	return out
}

// History returns the session's history store.
func (s *Session) History() history.History { return s.history }

// Close aborts whatever is in flight, waits until the session is quiet, and
// stops it. It returns once every subscriber has received the events
// already emitted (so a subscriber that never returns keeps Close waiting);
// no subscriber is called after that. Methods called after Close return
// policy.ErrClosed or do nothing. Close is safe to call more than once, and from
// any goroutine; every call returns on those terms, a callback's as below.
//
// Called on the value SubscribeSession hands a subscriber, Close does not
// wait for that subscriber: the events still queued for it are dropped,
// and only the rest of the call in progress runs after Close returns. Nor
// does it wait for another subscriber on whose value Close was called too.
// Called on the value an observer or a log handler finds in its context
// (FromContext), it returns ErrObserverCall and closes nothing. Called
// from a subscriber's function on any other value, it waits for that
// subscriber too, and so for ever (see Subscribe).
func (s *Session) Close() error {
	if s.onLoop() {
		return ErrObserverCall
	}
	s.closeOnce.Do(func() {
		// Nothing here waits for a subscriber, so a concurrent Close
		// waiting for this one to finish cannot be waited for in turn.
		s.Abort()
		_ = s.do(func() {
			s.x.stopTimer()
			s.qmu.Lock()
			s.closed = true // no closure is accepted after this one
			s.qmu.Unlock()
		})
		close(s.done)
	})
	s.subs.close(s.from)
	return nil
}

// do runs f on the loop and waits for it.
func (s *Session) do(f func()) error {
	if s.onLoop() {
		return ErrObserverCall
	}
	finished := make(chan struct{})
	if !s.post(func() {
		f()
		// What f changed is what the caller reads next, from Status.
		s.rest()
		close(finished)
	}) {
		return policy.ErrClosed
	}
	<-finished
	return nil
}

// post queues f for the loop without waiting for it, starting the loop's
// goroutine when none runs. After Close it drops f and reports false.
func (s *Session) post(f func()) bool {
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return false
	}
	s.queue = append(s.queue, f)
	start := !s.running
	s.running = true
	s.qmu.Unlock()
	if start {
		go s.drain()
	}
	return true
}

// drain is the loop's goroutine: it runs the queued closures one at a
// time, then ends when the queue is empty. The delivery of what the last
// closure emitted is its own last work: it delivers to a subscriber itself
// rather than start a goroutine and end (wakeLast), having handed the loop
// on first (a closure posted from then on starts a new drain).
func (s *Session) drain() {
	s.qmu.Lock()
	for len(s.queue) > 0 {
		f := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.qmu.Unlock()
		f()
		s.rest()
		s.qmu.Lock()
		if len(s.queue) == 0 {
			break
		}
		s.qmu.Unlock()
		s.subs.wake()
		s.qmu.Lock()
	}
	s.queue = nil // let the backing array go while waiting
	s.running = false
	s.qmu.Unlock()
	s.subs.wakeLast()
}

// publish copies the engine's status into the value Status reads.
func (s *Session) publish() {
	st := s.x.engine.Status()
	s.statusMu.Lock()
	s.status = st
	s.statusMu.Unlock()
}

// rest runs after every closure: Status reads the new state, and the
// callers of Abort are released once nothing is in flight.
func (s *Session) rest() {
	s.x.engine.Release() // an input whose effects were not carried out (a refused prompt's)
	s.publish()
	if s.x.quiet != nil && quiet(s.x.engine.Status()) {
		close(s.x.quiet)
		s.x.quiet = nil
	}
}

// quiet reports whether nothing is in flight in an engine of status st: no
// run and no compaction.
func quiet(st policy.Status) bool { return !st.Streaming && !st.Compacting }
