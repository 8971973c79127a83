// Package httpsafe keeps the provider adapters' credentials where they
// belong: the password of a base URL out of error texts, and the key out
// of a redirect that leaves the request's origin.
package httpsafe

import (
	"net/url"
	"strings"
)

// RedactURL returns raw with the password of its userinfo masked, as
// url.URL.Redacted does; a string that does not parse as a URL has all of
// its userinfo (what comes between "//" and the last "@" of the authority)
// masked, so that a URL too broken to parse does not give its password
// away either.
func RedactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(raw, "//")
	if !ok {
		return raw
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return raw
	}
	return scheme + "//xxxxx" + rest[at:]
}

// SameOrigin reports whether a redirect from from to to stays where a
// credential may follow: the same host and port (the scheme's default
// port when none is given), and not from https down to plain http. Go's
// client keeps Authorization on a redirect to a subdomain, another port
// or plain http; a key must not go there.
func SameOrigin(from, to *url.URL) bool {
	if strings.EqualFold(from.Scheme, "https") && !strings.EqualFold(to.Scheme, "https") {
		return false
	}
	return strings.EqualFold(from.Hostname(), to.Hostname()) && port(from) == port(to)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}
