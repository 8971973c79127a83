package httpsafe_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentfsm/agentfsm/internal/httpsafe"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://api.example.com/v1/":            "https://api.example.com/v1/",
		"https://user:pw@api.example.com/v1/":    "https://user:xxxxx@api.example.com/v1/",
		"https://user:pw@api.example.com/%zz":    "https://xxxxx@api.example.com/%zz",
		"https://u:p@w@bad host/x@y":             "https://xxxxx@bad host/x@y",
		"http://user:pw@[::1/x":                  "http://xxxxx@[::1/x",
		"no scheme %zz":                          "no scheme %zz",
		"https://no-userinfo.example.com/%zz@x":  "https://no-userinfo.example.com/%zz@x",
		"https://user@api.example.com/%zz":       "https://xxxxx@api.example.com/%zz",
		"https://user:pw@api.example.com?q=%zz@": "https://user:xxxxx@api.example.com?q=%zz@",
	} {
		assert.Equal(t, want, httpsafe.RedactURL(raw), raw)
	}
}

func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		same     bool
	}{
		{"https://a.test/v1", "https://a.test/v2", true},
		{"https://a.test/v1", "https://A.TEST:443/v2", true},
		{"http://a.test/v1", "http://a.test:80/v2", true},
		{"http://a.test/v1", "https://a.test/v2", false}, // another port
		{"https://a.test/v1", "http://a.test/v1", false},
		{"https://a.test/v1", "https://a.test:8443/v1", false},
		{"https://a.test/v1", "https://sub.a.test/v1", false},
		{"https://a.test/v1", "https://b.test/v1", false},
	} {
		from, err := url.Parse(tc.from)
		require.NoError(t, err)
		to, err := url.Parse(tc.to)
		require.NoError(t, err)
		assert.Equal(t, tc.same, httpsafe.SameOrigin(from, to), "%s → %s", tc.from, tc.to)
	}
}
