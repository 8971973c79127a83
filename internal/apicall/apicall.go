// Package apicall is the HTTP half of a provider adapter's model call, the
// same for both adapters: it sends the streamed request with a client that
// keeps the key from leaving the request's origin, sorts out the answer —
// the event stream, an error status, a document sent in place of the
// stream — within the session's bounds, and makes each failure the failed
// message the engine classifies. No error it returns holds the request
// (whose headers hold the key) or the response.
package apicall

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/internal/httpsafe"
	"github.com/agentfsm/agentfsm/internal/sse"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

// API is what differs between the providers' calls.
type API struct {
	// Name starts every error text: "anthropic", "openai".
	Name string
	// Keys are the request headers that hold the key: they are dropped
	// from a redirect that leaves the request's origin.
	Keys []string
	// RequestID is the response header holding the request's id, and
	// RequestIDLabel how an error status's text names it.
	RequestID, RequestIDLabel string
}

// HTTPError is the failure of a request the server answered with an
// error status: its status, headers and body (at most
// session.MaxErrorBody bytes). Its text holds the method, the URL with
// any password masked, the status and the request id, never the request's
// headers (which hold the key) or the body.
type HTTPError struct {
	Status int
	Header http.Header
	Body   []byte
	text   string
}

func (e *HTTPError) Error() string { return e.text }

// DocumentError is a successful answer that is a document, not the event
// stream asked for (sse.Document): an error object a server sent with its
// 200, a proxy's page, an answer not streamed. Body is its first
// session.MaxErrorBody bytes.
type DocumentError struct {
	Status    int
	MediaType string
	Header    http.Header
	Body      []byte
	api       string
}

func (e *DocumentError) Error() string {
	return fmt.Sprintf("%s: the server answered %d with a document (%s), not an event stream", e.api, e.Status, e.MediaType)
}

// BaseURLError is the error of a base URL that makes no request URL: its
// text holds the URL with any password masked, and not the parser's error
// (which quotes the URL whole).
func (a API) BaseURLError(base string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("%s: the base URL %q: %w", a.Name, httpsafe.RedactURL(base), err)
}

// Post sends body, JSON, to endpoint with client and the headers set
// adds (the key's among them), asking for an event stream, and returns
// what Do returns. base is the base URL endpoint was made from, named
// (its password masked) when endpoint makes no request.
func (a API) Post(ctx context.Context, client *http.Client, base, endpoint string, body []byte, set func(http.Header)) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, a.BaseURLError(base, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	set(req.Header)
	return a.Do(client, req)
}

// Do sends req with client (http.DefaultClient when nil) and returns the
// answer's event stream, its body inflated and bounded (session's
// LimitEventStream); the caller closes it. An error status is an
// *HTTPError, a document in place of the stream a *DocumentError (the
// body is closed for both); otherwise the transport's error.
func (a API) Do(client *http.Client, req *http.Request) (*http.Response, error) {
	resp, err := a.keyless(client).Do(req)
	if err != nil {
		return nil, err
	}
	sse.Inflate(resp)
	session.LimitErrorBody(resp, session.MaxErrorBody)
	session.LimitEventStream(resp, session.MaxStreamEvent, session.MaxStreamBody)
	if resp.StatusCode < 400 {
		doc, mediaType, isDoc, err := sse.Document(resp, session.MaxErrorBody)
		if err != nil || isDoc {
			resp.Body.Close()
		}
		if err != nil {
			return nil, err
		}
		if isDoc {
			return nil, &DocumentError{Status: resp.StatusCode, MediaType: mediaType, Header: resp.Header, Body: doc, api: a.Name}
		}
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, session.MaxErrorBody))
	msg := strings.TrimSpace(fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode)))
	msg = fmt.Sprintf("%s %q: %s", req.Method, req.URL.Redacted(), msg)
	if id := resp.Header.Get(a.RequestID); id != "" {
		msg += fmt.Sprintf(" (%s: %s)", a.RequestIDLabel, id)
	}
	return nil, &HTTPError{Status: resp.StatusCode, Header: resp.Header, Body: b, text: session.ClipError(errors.New(a.Name + ": " + msg)).Error()}
}

// keyless returns client (http.DefaultClient when nil) made to drop the
// key's headers from a redirect that leaves the request's origin: to
// another host or port, or from https to http (httpsafe.SameOrigin). Go's
// client drops Authorization on a redirect to another domain, as a
// credential, but not a header it does not know (x-api-key), and keeps
// both on a redirect to a subdomain, another port or plain http: without
// this, such a redirect would carry the key along, in the clear for http.
// The embedder's own CheckRedirect then decides, or Go's default of ten
// redirects.
func (a API) keyless(client *http.Client) *http.Client {
	if client == nil {
		client = http.DefaultClient
	}
	c := *client
	check := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > 0 && !httpsafe.SameOrigin(via[0].URL, req.URL) {
			for _, k := range a.Keys {
				req.Header.Del(k)
			}
		}
		if check != nil {
			return check(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}

// Failed returns the failed message of a call that failed with err, and
// whether err was Do's to tell: an error status is read by
// session.FailedMessage from its status, headers and body; a document
// that is an error object as the error event of a stream would be (its
// type and message say what failed), another document's text following
// what the error says.
func Failed(err error) (transcript.Message, bool) {
	var httpErr *HTTPError
	var docErr *DocumentError
	switch {
	case errors.As(err, &docErr):
		if _, ok := classify.ParseBody(docErr.Body); ok {
			return session.FailedMessage(0, docErr.Header, docErr.Body, errors.New(docErr.Error())), true
		}
		text := docErr.Error()
		if b := strings.TrimSpace(string(docErr.Body)); b != "" {
			text += ": " + b
		}
		return session.FailedMessage(0, docErr.Header, nil, session.ClipError(errors.New(text))), true
	case errors.As(err, &httpErr):
		return session.FailedMessage(httpErr.Status, httpErr.Header, httpErr.Body, errors.New(httpErr.text)), true
	}
	return transcript.Message{}, false
}
