package session

import (
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// The session's values are those of package policy, the decision core it
// drives: a program that embeds a Session needs no other import.

// Messages.
type (
	Role      = transcript.Role
	Usage     = transcript.Usage
	Model     = policy.Model
	Message   = transcript.Message
	Block     = transcript.Block
	BlockType = transcript.BlockType
	Cost      = transcript.Cost
)

// The block types.
const (
	BlockText     = transcript.BlockText
	BlockImage    = transcript.BlockImage
	BlockThinking = transcript.BlockThinking
	BlockToolCall = transcript.BlockToolCall
)

// TextBlock is a text block holding s (see policy.TextBlock).
func TextBlock(s string) Block { return transcript.TextBlock(s) }

// TextContent is content of one text block holding s (see
// policy.TextContent).
func TextContent(s string) []Block { return transcript.TextContent(s) }

// The roles.
const (
	RoleUser       = transcript.RoleUser
	RoleAssistant  = transcript.RoleAssistant
	RoleToolResult = transcript.RoleToolResult
	RoleSummary    = transcript.RoleSummary
)

// Settings.
type (
	Config           = policy.Config
	RetryConfig      = policy.RetryConfig
	CompactionConfig = policy.CompactionConfig
)

// DefaultConfig returns the policy's defaults (see policy.DefaultConfig).
func DefaultConfig() Config { return policy.DefaultConfig() }

// ReferenceConfig returns the reference agent's policy exactly (see
// policy.ReferenceConfig).
func ReferenceConfig() Config { return policy.ReferenceConfig() }

// ParseConfig reads settings as JSON over DefaultConfig (see
// policy.ParseConfig).
func ParseConfig(data []byte) (Config, error) { return policy.ParseConfig(data) }

// MaxDelay is the longest wait the session schedules (see policy.MaxDelay).
const MaxDelay = policy.MaxDelay

// Events.
type (
	Event               = events.Event
	AgentStart          = events.AgentStart
	TurnStart           = events.CallStart
	MessageStart        = events.MessageStart
	MessageUpdate       = events.MessageUpdate
	Delta               = events.Delta
	MessageEnd          = events.MessageEnd
	TurnEnd             = events.CallEnd
	AgentEnd            = events.AgentEnd
	AutoRetryStart      = events.AutoRetryStart
	AutoRetryEnd        = events.AutoRetryEnd
	AutoCompactionStart = events.AutoCompactionStart
	AutoCompactionEnd   = events.AutoCompactionEnd
	StateChange         = events.StateChange
	TurnSettled         = events.TurnSettled
	EventsDropped       = events.EventsDropped
	RetryOutcome        = events.RetryOutcome
)

// The outcomes of a retry chain.
const (
	RetryRecovered = events.RetryRecovered
	RetryExhausted = events.RetryExhausted
	RetryCancelled = events.RetryCancelled
	RetryFailed    = events.RetryFailed
)

// Compaction.
type (
	CompactionReason = transcript.CompactionReason
	Compaction       = transcript.Compaction
	SummaryRequest   = policy.SummaryRequest
	Summary          = policy.Summary
	DigestSummarizer = policy.DigestSummarizer
)

// The compaction reasons.
const (
	ReasonOverflow  = transcript.ReasonOverflow
	ReasonThreshold = transcript.ReasonThreshold
	ReasonManual    = transcript.ReasonManual
)

// DefaultDigestChars is the default bound of a digest.
const DefaultDigestChars = policy.DefaultDigestChars

// History entries.
type (
	Entry     = transcript.Entry
	EntryType = transcript.EntryType
)

// The entry types.
const (
	EntryMessage    = transcript.EntryMessage
	EntryCompaction = transcript.EntryCompaction
	EntryRemoval    = transcript.EntryRemoval
)

// Errors: Prompt's and Compact's errors match one of these (see package
// policy for each one's meaning).
var (
	ErrBusy                = policy.ErrBusy
	ErrClosed              = policy.ErrClosed
	ErrRetryCancelled      = policy.ErrRetryCancelled
	ErrAborted             = policy.ErrAborted
	ErrExhausted           = policy.ErrExhausted
	ErrProvider            = policy.ErrProvider
	ErrOverflow            = policy.ErrOverflow
	ErrStartFailed         = policy.ErrStartFailed
	ErrHistory             = policy.ErrHistory
	ErrNothingToCompact    = policy.ErrNothingToCompact
	ErrAlreadyCompacted    = policy.ErrAlreadyCompacted
	ErrCompactionCancelled = policy.ErrCompactionCancelled
	ErrInvalidConfig       = policy.ErrInvalidConfig
	ErrInvalidEntry        = transcript.ErrInvalidEntry
)

// ExhaustedError is the error of a turn whose retry chain ran out.
type ExhaustedError = policy.ExhaustedError
