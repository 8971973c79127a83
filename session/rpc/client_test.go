package rpc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/session/rpc"
)

// nopWriteCloser is a server's input that takes every command and never
// fails: nothing about the write tells the client the server is gone.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// issue item 7: once the server's output has ended, a call returns
// ErrClientClosed at once instead of waiting for a response nothing will
// send (here it would wait until its context's deadline).
func TestClientCallAfterServerWentAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := rpc.NewClient(bytes.NewReader(nil), nopWriteCloser{io.Discard}) // the server's output ended at once
		defer c.Close()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		_, err := c.GetState(ctx)
		assert.ErrorIs(t, err, rpc.ErrClientClosed)
		assert.ErrorIs(t, c.Prompt(ctx, "hi"), rpc.ErrClientClosed)
		assert.ErrorIs(t, c.Abort(ctx), rpc.ErrClientClosed)
		assert.NoError(t, c.WaitForIdle(ctx), "no turn was acknowledged")
	})
}

// issue item 7: calls racing with the end of the server's output all
// return ErrClientClosed, whether they were sent before the end or after.
func TestClientCallsRacingServerGoingAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out, server := io.Pipe()
		c := rpc.NewClient(out, nopWriteCloser{io.Discard})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		errs := make([]error, 16)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { _, errs[i] = c.GetState(ctx) })
			if i == len(errs)/2 {
				server.Close()
			}
		}
		wg.Wait()
		for i, err := range errs {
			assert.ErrorIs(t, err, rpc.ErrClientClosed, "call %d", i)
		}
	})
}

// issue item 7: a response the server sent just before its output ended is
// the call's result, not ErrClientClosed, though the end is seen too.
func TestClientResponseJustBeforeServerWentAway(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			out, server := io.Pipe()
			cmdR, cmdW := io.Pipe()
			c := rpc.NewClient(out, cmdW)
			defer c.Close()
			type result struct {
				st  rpc.State
				err error
			}
			got := make(chan result, 1)
			go func() {
				st, err := c.GetState(context.Background())
				got <- result{st, err}
			}()
			line, err := bufio.NewReader(cmdR).ReadBytes('\n')
			require.NoError(t, err)
			var cmd struct {
				ID string `json:"id"`
			}
			require.NoError(t, json.Unmarshal(line, &cmd))
			_, err = fmt.Fprintf(server, `{"type":"response","id":%q,"command":"get_state","success":true,"data":{"sessionId":"s1"}}`+"\n", cmd.ID)
			require.NoError(t, err)
			server.Close()
			r := <-got
			require.NoError(t, r.err)
			assert.Equal(t, "s1", r.st.SessionID)
		})
	}
}
