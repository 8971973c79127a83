package providertest_test

import (
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a reply leaves a goroutine behind: the
// adapters' tests run these fakes under goleak too.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder stands in for the test the fake reports to, so that a test can
// check what the fake reported.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) reported() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...)
}
