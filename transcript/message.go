package transcript

// Role says who wrote a message.
type Role string

// The roles.
const (
	RoleUser       Role = "user"
	RoleAssistant  Role = "assistant"
	RoleToolResult Role = "toolResult"
)

// StopReason is why a model call ended.
type StopReason string

// The stop reasons an assistant message can have.
const (
	StopReasonStop    StopReason = "stop"
	StopReasonToolUse StopReason = "toolUse"
	StopReasonLength  StopReason = "length"
	StopReasonError   StopReason = "error"
	StopReasonAborted StopReason = "aborted"
)

// Usage is the token usage a model call reports. The classifier reads a
// negative count as 0, and its checks never overflow, however large the
// counts.
type Usage struct {
	Input       int `json:"input"`
	Output      int `json:"output"`
	CacheRead   int `json:"cacheRead"`
	CacheWrite  int `json:"cacheWrite"`
	TotalTokens int `json:"totalTokens"`
	// Cost is what the call cost, when the agent knows it.
	Cost *Cost `json:"cost,omitempty"`
}

// Cost is what a model call cost, in the provider's currency (usually US
// dollars), by part, as the reference agent reports it.
type Cost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
	Total      float64 `json:"total"`
}

// Message is one entry of a conversation: a user prompt, an assistant
// message (the result of one model call), or a tool result.
//
// ID is the message's identity: the session removes and finds messages by
// it, never by position or role. An agent should set it; the session fills
// an empty ID when the message ends, and replaces one that an entry of the
// history already has: the ID in the events.MessageEnd event is the one the
// session keeps. As JSON (history, RPC) a message takes the reference
// agent's wire shape; see MarshalJSON.
type Message struct {
	ID   string
	Role Role
	// Content is the message's content blocks, kept byte for byte through
	// retries, compaction, history and snapshots, once the engine has
	// taken them under its text rule (valid UTF-8; see Block). A user message holds
	// text and images; an assistant message text, thinking and tool
	// calls; a tool result text and images.
	Content []Block
	// StringContent says the content is written as a plain JSON string,
	// as a user message's may be: Content is then one text block (or
	// none, for ""). Content of any other form is written as blocks.
	StringContent bool

	// ToolError, ToolCallID and ToolName are a tool result's: whether the
	// tool failed (isError), the ID of the tool call block it answers, and
	// the tool's name. ToolError comes first, beside StringContent, so
	// that the two take one word: a Message is 224 bytes, not 232.
	ToolError  bool
	ToolCallID string
	ToolName   string

	// The fields below are an assistant message's.
	StopReason   StopReason
	ErrorMessage string
	Usage        *Usage
	Provider     string
	Model        string
	// Timestamp is when the message was made, in milliseconds since the
	// Unix epoch.
	Timestamp int64

	// Typed facts about a failed call, when the agent knows them; the
	// classifier weighs them before the text (see package classify).
	HTTPStatus int
	ErrorType  string
	Headers    map[string]string
	// Err is never written.
	Err error
}

// IsError reports whether m is an assistant message that ended in an error.
func (m Message) IsError() bool {
	return m.Role == RoleAssistant && m.StopReason == StopReasonError
}
