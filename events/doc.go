// Package events is what a session reports while it works: the agent's own
// events (AgentStart, CallStart, MessageStart, MessageUpdate, MessageEnd,
// CallEnd, AgentEnd), passed on as the agent reports them, and the
// recovery's (AutoRetryStart/End, AutoCompactionStart/End, StateChange),
// with TurnSettled closing each prompt's turn and EventsDropped telling a
// slow subscriber what it missed.
//
// Words: a turn is one user prompt, from Prompt to its TurnSettled; a call
// is one model call within it, from CallStart to CallEnd (the RPC wire
// keeps the reference agent's names, "turn_start" and "turn_end").
//
// Events are values and nothing else: package policy makes them, package
// session delivers them to subscribers and observers, package session/rpc
// writes them as JSON lines.
package events
