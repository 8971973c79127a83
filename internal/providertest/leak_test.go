package providertest_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/internal/providertest"
)

type withRequest struct{ req *http.Request }

func (e *withRequest) Error() string { return "with a request" }

type withHeader struct{ h http.Header }

func (e withHeader) Error() string { return "with a header" }

// HoldsHTTP finds a request, a response or a header however an error
// wraps it, and nothing in errors that hold none.
func TestHoldsHTTP(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "http://x.test/", nil)
	for _, err := range []error{
		&withRequest{req},
		fmt.Errorf("a: %w", &withRequest{req}),
		errors.Join(errors.New("plain"), fmt.Errorf("b: %w", withHeader{http.Header{"X-Api-Key": {"k"}}})),
		&url.Error{Op: "Post", URL: "http://x.test/", Err: &withRequest{req}},
	} {
		assert.True(t, providertest.HoldsHTTP(err), "%v", err)
	}
	for _, err := range []error{
		nil,
		errors.New("plain"),
		fmt.Errorf("a: %w", &url.Error{Op: "Post", URL: "http://x.test/", Err: errors.New("reset")}),
		withHeader{},
		&withRequest{},
	} {
		assert.False(t, providertest.HoldsHTTP(err), "%v", err)
	}
}
