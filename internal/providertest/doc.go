// Package providertest serves model providers' HTTP APIs from a script, for
// the tests of the provider adapters: a fake of Anthropic's Messages API
// (NewAnthropic) and one of OpenAI's Chat Completions (NewOpenAI), each an
// http.Handler that answers every request with the next queued Reply, in the
// provider's documented wire format (JSON bodies, server-sent event streams,
// error bodies and headers; docs/providers.md), and records every request it
// received.
//
// Client returns an *http.Client whose transport calls a handler in
// process: no socket, so a test under testing/synctest keeps its fake clock
// (real TCP would block the bubble). A reply can stop part-way (Break): the
// connection resets, the body ends early, or the server stalls until the
// request's context ends.
//
// It is for tests only: no library package imports it. It is not a model
// either: it never reads the conversation it is sent, beyond checking that
// the request is one the real API would accept.
package providertest
