package session_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// sessionsAt returns count session IDs whose start credential among n is
// i: FNV-1a(id) mod n == i.
func sessionsAt(i, n, count int) []string {
	var ids []string
	for k := 0; len(ids) < count; k++ {
		id := fmt.Sprintf("session-%d", k)
		h := fnv.New32a()
		h.Write([]byte(id))
		if int(h.Sum32()%uint32(n)) == i {
			ids = append(ids, id)
		}
	}
	return ids
}

// credentialAgent records the credential of each run it passes on.
type credentialAgent struct {
	session.Agent
	mu  sync.Mutex
	ids []string
}

func (a *credentialAgent) Run(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	a.mu.Lock()
	if req.Credential != nil {
		a.ids = append(a.ids, req.Credential.ID)
	}
	a.mu.Unlock()
	return a.Agent.Run(ctx, req, emit)
}

// issue item 12: a session on A whose key hits a usage limit retries at
// once on C, the next key of its type, and never runs on B (oauth).
func TestUsageLimitSwitchesToTheNextCredentialOfItsType(t *testing.T) {
	bubble(t, func(t *testing.T) {
		store, err := credentials.NewMemoryCredentials(nil,
			policy.Credential{ID: "A", Provider: "scripted", Type: "api_key"},
			policy.Credential{ID: "B", Provider: "scripted", Type: "oauth"},
			policy.Credential{ID: "C", Provider: "scripted", Type: "api_key"})
		if err != nil {
			t.Fatal(err)
		}
		agent := &credentialAgent{Agent: scripted.New(scripted.Script{Calls: []scripted.Call{
			fail(usageLimit), fail(usageLimit), ok("done"),
		}})}
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithCredentials(store),
			session.WithSessionID(sessionsAt(0, 3, 1)[0]))
		require.NoError(t, err)
		defer s.Close()
		rec := record(s)
		start := time.Now()
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Equal(t, []string{"A", "C", "A"}, agent.ids, "A, then C at once, then A again after its backoff: never B")
		assert.Equal(t, []string{
			`retry_start 1/3 0ms "` + usageLimit + `"`,
			`retry_start 2/3 4000ms "` + usageLimit + `"`,
			"retry_end ok 2",
		}, rec.recovery())
		assert.Equal(t, 4*time.Second, time.Since(start))
	})
}
