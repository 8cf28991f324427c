package rpc

import (
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// otherUID is the uid (and gid) a child process runs as to be another peer.
const otherUID = 65533

func TestIdempotency(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	call := func(t *testing.T, key string, n int64) (int64, error) {
		var out countBody
		err := h.client.Call(t.Context(), "test.idem", &countBody{N: n}, &out, WithIdem(key))
		return out.N, err
	}
	t.Run("retry returns the stored answer", func(t *testing.T) {
		is := is.New(t)
		before := h.counter.Load()
		first, err := call(t, "k-retry", 1)
		is.NoErr(err)
		for range 3 {
			again, err := call(t, "k-retry", 1) // a new id each time
			is.NoErr(err)
			is.Equal(again, first)
		}
		is.Equal(h.counter.Load(), before+1) // the handler ran once
	})
	t.Run("other body conflicts", func(t *testing.T) {
		is := is.New(t)
		_, err := call(t, "k-conflict", 1)
		is.NoErr(err)
		_, err = call(t, "k-conflict", 2)
		we := asWire(t, err, wire.CodeRequestIdemConflict)
		is.Equal(we.Retry, wire.RetryNever)
	})
	t.Run("keys are per op and per key", func(t *testing.T) {
		is := is.New(t)
		a, err := call(t, "k-a", 1)
		is.NoErr(err)
		b, err := call(t, "k-b", 1)
		is.NoErr(err)
		is.True(a != b)
		var e echoBody
		is.NoErr(h.client.Call(t.Context(), "test.echo", &echoBody{N: 1}, &e, WithIdem("k-a")))
		is.Equal(e.N, int64(1))
	})
	t.Run("concurrent retries run once", func(t *testing.T) {
		is := is.New(t)
		before := h.counter.Load()
		var wg sync.WaitGroup
		got := make([]int64, 8)
		for i := range got {
			wg.Go(func() {
				c := NewClient(h.path, 0)
				defer c.Close()
				var out countBody
				if err := c.Call(t.Context(), "test.idem", &countBody{N: 9}, &out, WithIdem("k-conc")); err != nil {
					t.Error(err)
				}
				got[i] = out.N
			})
		}
		wg.Wait()
		is.Equal(h.counter.Load(), before+1)
		for _, n := range got {
			is.Equal(n, got[0])
		}
	})
	t.Run("required key", func(t *testing.T) {
		is := is.New(t)
		h2 := start(t, options{ops: []Op{{Name: "test.must", Handler: h.srv.ops["health"].Handler, IdemRequired: true}}})
		asWire(t, h2.client.Call(t.Context(), "test.must", nil, nil), wire.CodeRequestIdemRequired)
		is.NoErr(h2.client.Call(t.Context(), "test.must", nil, nil, WithIdem("k")))
	})
}

// groupSocket lets uid/gid otherUID reach the harness socket: the temp dir
// is made traversable, the socket directory 0750 and the socket 0660, both
// with group otherUID.
func groupSocket(t *testing.T) options {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a child under another uid")
	}
	return options{sockCfg: func(c *sock.Config) {
		c.DirMode, c.SocketMode, c.Group = sock.DirModeGroup, sock.SocketModeGroup, otherUID
	}}
}

// TestIdempotencyIsPerPeer runs a second client as another uid that makes
// the same call with the same key and body: it must get a fresh execution,
// never the first peer's stored answer.
func TestIdempotencyIsPerPeer(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	o := groupSocket(t)
	o.cfg = func(c *Config) { c.Roles = Roles{roleAdmin: {euid, otherUID}} }
	h := start(t, o)
	is.NoErr(os.Chmod(h.dir, 0o755))
	bin := testBinary(t, h.dir)

	var mine countBody
	is.NoErr(h.client.Call(t.Context(), "test.idem", &countBody{N: 5}, &mine, WithIdem("shared-key")))
	is.Equal(mine.N, int64(1))

	env := []string{"HK_SOCK=" + h.path, "HK_OP=test.idem", "HK_IDEM=shared-key", "HK_N=5"}
	other := runChildCall(t, bin, otherUID, env...)
	is.Equal(other.UID, otherUID)
	is.Equal(other.Code, "")
	is.Equal(other.N, int64(2)) // a fresh execution
	is.Equal(h.counter.Load(), int64(2))

	// Each peer's retry gets its own stored answer.
	again := runChildCall(t, bin, otherUID, env...)
	is.Equal(again.N, int64(2))
	var mine2 countBody
	is.NoErr(h.client.Call(t.Context(), "test.idem", &countBody{N: 5}, &mine2, WithIdem("shared-key")))
	is.Equal(mine2.N, int64(1))
	is.Equal(h.counter.Load(), int64(2))

	// A different body from the other peer conflicts only with its own record.
	conflict := runChildCall(t, bin, otherUID, "HK_SOCK="+h.path, "HK_OP=test.idem", "HK_IDEM=shared-key", "HK_N=6")
	is.Equal(conflict.Code, wire.CodeRequestIdemConflict)
}

func TestPeerDenied(t *testing.T) {
	t.Parallel()
	t.Run("no role", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		h := start(t, options{cfg: func(c *Config) { c.Roles = Roles{roleAdmin: {4242}} }})
		ctx := WithCorr(t.Context(), "c-denied")
		for _, op := range []string{"health", "test.echo", "no.such"} {
			err := h.client.Call(ctx, op, nil, nil)
			asWire(t, err, wire.CodePeerDenied)
		}
		evs := h.events.find(wire.CodePeerDenied)
		is.Equal(len(evs), 3)
		for _, e := range evs {
			is.Equal(e.Outcome, "denied")
			is.Equal(e.Peer.UID, euid)
			is.True(e.Peer.PID > 0)
			is.Equal(e.Corr, "c-denied")
		}
		is.Equal(evs[0].Op, "health")
		is.Equal(h.counter.Load(), int64(0))
	})
	t.Run("authenticate refuses at connect", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		var calls atomic.Int64
		h := start(t, options{cfg: func(c *Config) {
			c.Authenticate = func(p sock.Peer) error {
				calls.Add(1)
				if p.PID <= 0 {
					return wire.Errorf(wire.CodeInternal, "no pid")
				}
				return errors.New("executable not on the allowlist")
			}
		}})
		for range 3 {
			err := h.client.Call(t.Context(), "test.echo", nil, nil)
			asWire(t, err, wire.CodePeerDenied)
			is.True(!strings.Contains(err.Error(), "allowlist")) // the reason stays local
		}
		is.Equal(h.counter.Load(), int64(0))
		is.True(calls.Load() >= 1)
		is.True(len(h.events.find(wire.CodePeerDenied)) >= 1) // audited
	})
	t.Run("authenticate is asked again before each request", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		var calls, allowFor atomic.Int64
		allowFor.Store(2) // the accept and the first request pass; then the peer "exec'ed"
		h := start(t, options{cfg: func(c *Config) {
			c.Authenticate = func(sock.Peer) error {
				if calls.Add(1) > allowFor.Load() {
					return wire.Errorf(wire.CodePeerDenied, "peer is not allowed")
				}
				return nil
			}
		}})
		is.NoErr(h.client.Call(t.Context(), "health", nil, nil))
		asWire(t, h.client.Call(t.Context(), "health", nil, nil), wire.CodePeerDenied)
	})
	t.Run("authenticate allows", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		h := start(t, options{cfg: func(c *Config) {
			c.Authenticate = func(sock.Peer) error { return nil }
		}})
		is.NoErr(h.client.Call(t.Context(), "health", nil, nil))
	})
	t.Run("role but not the op's", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		h := start(t, options{})
		asWire(t, h.client.Call(t.Context(), "test.ops", nil, nil), wire.CodePeerDenied)
		is.NoErr(h.client.Call(t.Context(), "health", nil, nil)) // health: any role
		evs := h.events.find(wire.CodePeerDenied)
		is.Equal(len(evs), 1)
		is.Equal(evs[0].Outcome, "denied")
		is.Equal(evs[0].Op, "test.ops")
	})
	t.Run("another uid without a role", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		h := start(t, groupSocket(t))
		is.NoErr(os.Chmod(h.dir, 0o755))
		bin := testBinary(t, h.dir)
		res := runChildCall(t, bin, otherUID, "HK_SOCK="+h.path, "HK_OP=test.idem", "HK_IDEM=k", "HK_N=1")
		is.Equal(res.Code, wire.CodePeerDenied)
		var found bool
		for range 100 {
			for _, e := range h.events.all() {
				if e.Peer.UID == otherUID && e.Outcome == "denied" && e.Code == wire.CodePeerDenied {
					found = true
				}
			}
			if found {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		is.True(found) // an audit event names the other uid
		is.Equal(h.counter.Load(), int64(0))
	})
}
