package lease

import (
	"bytes"
	"encoding/base32"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/cmd/secretd/internal/secmem"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

var (
	stager   = sock.Peer{UID: 1001, PID: 11}
	consumer = sock.Peer{UID: 1002, PID: 22}
	canary   = []byte("CANARY-lease-7f3a9c")
)

// clock is a settable clock for expiry tests.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Unix(1_800_000_000, 0).UnixNano())
	return c
}
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func newTable(t *testing.T, now func() time.Time) (*Table, *secmem.Allocator) {
	t.Helper()
	alloc := secmem.New(slog.New(slog.DiscardHandler))
	tb, err := New(Config{Epoch: [EpochLen]byte{1, 2, 3, 4, 5, 6, 7, 8}, Alloc: alloc, Now: now, MaxLeases: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tb.Close)
	return tb, alloc
}

func spec(inv string, ttl time.Duration) Spec {
	return Spec{Credential: "github", Destination: "https://api.github.com", Target: "header:Authorization",
		Template: "Bearer {}", Invocation: inv, TTL: ttl, Stager: stager}
}

func stage(t *testing.T, tb *Table, inv string, ttl time.Duration) Staged {
	t.Helper()
	st, err := tb.Stage(spec(inv, ttl), canary)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestHandleAndPlaceholderShape(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	tb, _ := newTable(t, nil)
	st := stage(t, tb, "inv-1", time.Minute)
	is.Equal(len(st.Handle), HandleLen)
	is.True(len(st.Handle) <= secretdapi.MaxHandleLen)
	is.Equal(st.Handle[:EpochLen], []byte{1, 2, 3, 4, 5, 6, 7, 8})
	is.True(strings.HasPrefix(st.Placeholder, PlaceholderPrefix))
	body := strings.TrimPrefix(st.Placeholder, PlaceholderPrefix)
	is.Equal(len(body), 32)
	is.Equal(strings.ToLower(body), body)
	raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(strings.ToUpper(body))
	is.NoErr(err)
	is.Equal(len(raw), 20)
	is.True(!bytes.Contains(st.Handle, raw)) // the placeholder is not derived from the handle
	is.Equal(len(st.MAC.FP()), FPLen)
}

// TestConcurrentConsumeExactlyOnce: 64 goroutines consume the same handle,
// 1000 rounds; exactly one wins each round and the rest see lease.consumed.
func TestConcurrentConsumeExactlyOnce(t *testing.T) {
	t.Parallel()
	tb, alloc := newTable(t, nil)
	const workers, rounds = 64, 1000
	for round := range rounds {
		st := stage(t, tb, "inv-race", time.Minute)
		var wins, consumed atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := tb.Consume("inv-race", [][]byte{st.Handle}, consumer)
				if err != nil {
					t.Error(err)
					return
				}
				switch {
				case res.Err() == nil:
					if !bytes.Equal(res.Leases[0].Value.Bytes(), canary) {
						t.Error("wrong value")
					}
					res.Leases[0].Value.Free()
					wins.Add(1)
				case wire.HasCode(res.Err(), secretdapi.CodeLeaseConsumed):
					consumed.Add(1)
				default:
					t.Errorf("unexpected error %v", res.Err())
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 || consumed.Load() != workers-1 {
			t.Fatalf("round %d: %d wins, %d consumed", round, wins.Load(), consumed.Load())
		}
	}
	if n, _ := tb.Counts(); n != 0 || alloc.Live() != 0 {
		t.Fatalf("leases left: %d, live buffers: %d", n, alloc.Live())
	}
}

func TestBatchAllOrNothing(t *testing.T) {
	t.Parallel()
	c := newClock()
	tb, _ := newTable(t, c.now)
	h1 := stage(t, tb, "inv-b", time.Minute)
	old := stage(t, tb, "inv-b", time.Second)
	c.advance(2 * time.Second)
	h2 := stage(t, tb, "inv-b", time.Minute)
	unknown := append([]byte{1, 2, 3, 4, 5, 6, 7, 8}, make([]byte, RandLen)...)
	stale := append([]byte{9, 9, 9, 9, 9, 9, 9, 9}, h2.Handle[EpochLen:]...)
	tests := []struct {
		name    string
		handles [][]byte
		code    string
		indices []int
		msg     string
	}{
		{"duplicate", [][]byte{h1.Handle, h1.Handle}, secretdapi.CodeLeaseDuplicate, []int{1}, "handles[1]: lease.duplicate_handle (same as handles[0])"},
		{"expired in the middle", [][]byte{h1.Handle, old.Handle, h2.Handle}, secretdapi.CodeLeaseExpired, []int{1}, "handles[1]: lease.expired"},
		{"invalid and unknown", [][]byte{h1.Handle, []byte("short"), unknown}, secretdapi.CodeLeaseInvalidHandle, []int{1, 2}, "handles[2]: lease.not_found"},
		{"stale epoch", [][]byte{stale}, secretdapi.CodeLeaseStaleEpoch, []int{0}, "handles[0]: lease.stale_epoch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			res, err := tb.Consume("inv-b", tt.handles, consumer)
			is.NoErr(err)
			is.True(res.Err() != nil)
			is.Equal(wire.CodeOf(res.Err()), tt.code)
			var idx []int
			for _, f := range res.Failures {
				idx = append(idx, f.Index)
			}
			is.Equal(idx, tt.indices)
			msg := res.Err().Error()
			is.True(strings.Contains(msg, tt.msg))
			is.True(strings.HasPrefix(wire.AsError(res.Err()).Msg, "nothing consumed"))
			is.True(!strings.Contains(msg, string(canary)))
		})
	}
	// Nothing was consumed: h2 and h1 still go through together, in order.
	is := is.New(t)
	res, err := tb.Consume("inv-b", [][]byte{h2.Handle, h1.Handle}, consumer)
	is.NoErr(err)
	is.NoErr(res.Err())
	is.Equal(res.Leases[0].MAC, h2.MAC)
	is.Equal(res.Leases[1].MAC, h1.MAC)
	for _, l := range res.Leases {
		is.Equal(l.Value.Bytes(), canary)
		l.Value.Free()
	}
}

func TestWrongInvocation(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	tb, _ := newTable(t, nil)
	st := stage(t, tb, "inv-a", time.Minute)
	res, err := tb.Consume("inv-other", [][]byte{st.Handle}, consumer)
	is.NoErr(err)
	is.Equal(wire.CodeOf(res.Err()), secretdapi.CodeLeaseWrongInvocation)
	_, _, err = tb.Lookup(st.Handle)
	is.NoErr(err) // still there
}

func TestLookupTwiceThenConsume(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	tb, _ := newTable(t, nil)
	st := stage(t, tb, "inv-l", time.Minute)
	for range 2 {
		m, mac, err := tb.Lookup(st.Handle)
		is.NoErr(err)
		is.Equal(mac, st.MAC)
		is.Equal(m.Credential, "github")
		is.Equal(m.Invocation, "inv-l")
		is.Equal(m.Placeholder, st.Placeholder)
		is.Equal(m.HandleFP, st.MAC.FP())
		is.Equal(m.StagerUID, stager.UID)
	}
	res, err := tb.Consume("inv-l", [][]byte{st.Handle}, consumer)
	is.NoErr(err)
	is.NoErr(res.Err())
	res.Leases[0].Value.Free()
	_, _, err = tb.Lookup(st.Handle)
	is.Equal(wire.CodeOf(err), secretdapi.CodeLeaseConsumed)
}

func TestExpiryAndSweep(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c := newClock()
	tb, alloc := newTable(t, c.now)
	st := stage(t, tb, "inv-e", time.Second)
	is.Equal(alloc.Live(), int64(1))
	c.advance(999 * time.Millisecond)
	_, _, err := tb.Lookup(st.Handle)
	is.NoErr(err)
	c.advance(time.Millisecond)
	_, _, err = tb.Lookup(st.Handle)
	is.Equal(wire.CodeOf(err), secretdapi.CodeLeaseExpired)
	res, _ := tb.Consume("inv-e", [][]byte{st.Handle}, consumer)
	is.Equal(wire.CodeOf(res.Err()), secretdapi.CodeLeaseExpired)
	is.Equal(len(tb.List("", "")), 0) // expired leases are not listed
	n, _ := tb.Sweep()
	is.Equal(n, 1)
	is.Equal(alloc.Live(), int64(0)) // the value was zeroed and unmapped at once
	_, _, err = tb.Lookup(st.Handle)
	is.Equal(wire.CodeOf(err), secretdapi.CodeLeaseExpired) // metadata kept for ExpiredGrace
	res, _ = tb.Consume("inv-e", [][]byte{st.Handle}, consumer)
	is.Equal(wire.CodeOf(res.Err()), secretdapi.CodeLeaseExpired)
	c.advance(ExpiredGrace)
	n, _ = tb.Sweep()
	is.Equal(n, 0)
	_, _, err = tb.Lookup(st.Handle)
	is.Equal(wire.CodeOf(err), secretdapi.CodeLeaseNotFound)
}

// TestRealTTL uses the real monotonic clock: a 1 s lease expires.
func TestRealTTL(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	tb, _ := newTable(t, nil)
	st := stage(t, tb, "inv-ttl", time.Second)
	time.Sleep(1100 * time.Millisecond)
	res, err := tb.Consume("inv-ttl", [][]byte{st.Handle}, consumer)
	is.NoErr(err)
	is.Equal(wire.CodeOf(res.Err()), secretdapi.CodeLeaseExpired)
}

func TestTombstoneReuse(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c := newClock()
	tb, _ := newTable(t, c.now)
	st := stage(t, tb, "inv-t", time.Minute)
	res, _ := tb.Consume("inv-t", [][]byte{st.Handle}, consumer)
	is.NoErr(res.Err())
	res.Leases[0].Value.Free()
	for _, first := range []bool{true, false, false} {
		res, _ = tb.Consume("inv-t", [][]byte{st.Handle}, consumer)
		is.Equal(wire.CodeOf(res.Err()), secretdapi.CodeLeaseConsumed)
		is.Equal(len(res.Reuses), 1)
		is.Equal(res.Reuses[0].First, first) // only the first reuse is reported in full
		is.Equal(res.Reuses[0].Stager, stager)
		is.Equal(res.Reuses[0].Consumer, consumer)
	}
	c.advance(time.Minute)
	_, tombs := tb.Sweep()
	is.Equal(tombs, 1)
	res, _ = tb.Consume("inv-t", [][]byte{st.Handle}, consumer)
	is.Equal(wire.CodeOf(res.Err()), secretdapi.CodeLeaseNotFound)
}

func TestRevokeAndList(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	tb, alloc := newTable(t, nil)
	a1 := stage(t, tb, "inv-a", time.Minute)
	stage(t, tb, "inv-a", time.Minute)
	stage(t, tb, "inv-b", time.Minute)
	is.Equal(len(tb.List("", "")), 3)
	is.Equal(len(tb.List("inv-a", "")), 2)
	is.Equal(len(tb.Revoke("inv-a", "")), 2)
	is.Equal(alloc.Live(), int64(1))
	is.Equal(len(tb.List("", "")), 1)
	res, _ := tb.Consume("inv-a", [][]byte{a1.Handle}, consumer)
	is.Equal(wire.CodeOf(res.Err()), secretdapi.CodeLeaseNotFound)
}

// TestRevokeAndListByOwner: a revoke that names an owner takes exactly
// that owner's leases of the invocation; another owner's, and leases
// staged without an owner, stay (and List shows each with its owner).
func TestRevokeAndListByOwner(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	tb, alloc := newTable(t, nil)
	stageOwned := func(inv, owner string) Staged {
		sp := spec(inv, time.Minute)
		sp.Owner = owner
		st, err := tb.Stage(sp, canary)
		is.NoErr(err)
		return st
	}
	mine := stageOwned("inv-a", "sv-mine")
	stageOwned("inv-a", "sv-mine")
	theirs := stageOwned("inv-a", "sv-theirs")
	stageOwned("inv-b", "sv-mine")
	none := stageOwned("inv-a", "")
	is.Equal(len(tb.List("", "sv-mine")), 3)
	is.Equal(len(tb.List("inv-a", "sv-mine")), 2)
	is.Equal(len(tb.List("inv-a", "sv-theirs")), 1)
	is.Equal(tb.List("inv-a", "sv-theirs")[0].Owner, "sv-theirs")
	is.Equal(len(tb.List("inv-a", "")), 4)
	is.Equal(len(tb.Revoke("inv-a", "sv-mine")), 2) // allowed: its own
	is.Equal(len(tb.Revoke("inv-a", "sv-mine")), 0)
	is.Equal(alloc.Live(), int64(3))
	left := tb.List("inv-a", "")
	is.Equal(len(left), 2) // refused: the other owner's and the unowned lease stay
	is.Equal(left[0].Owner+left[1].Owner, "sv-theirs")
	res, _ := tb.Consume("inv-a", [][]byte{mine.Handle}, consumer)
	is.Equal(wire.CodeOf(res.Err()), secretdapi.CodeLeaseNotFound)
	res, _ = tb.Consume("inv-a", [][]byte{theirs.Handle, none.Handle}, consumer)
	is.NoErr(res.Err()) // still consumable
}

func TestLimits(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c := newClock()
	tb, _ := newTable(t, c.now)
	stage(t, tb, "inv-max", time.Second)
	for range 99 {
		stage(t, tb, "inv-max", time.Minute)
	}
	_, err := tb.Stage(spec("inv-max", time.Minute), canary)
	is.Equal(wire.CodeOf(err), wire.CodeServerBusy)
	c.advance(time.Second) // an expired lease makes room
	stage(t, tb, "inv-max", time.Minute)
	_, err = tb.Stage(spec("inv-max", time.Minute), canary)
	is.Equal(wire.CodeOf(err), wire.CodeServerBusy)
	_, err = tb.Consume("inv-max", make([][]byte, MaxBatch+1), consumer)
	is.Equal(wire.CodeOf(err), wire.CodeRequestInvalid)
}

func TestOtherEpochIsStale(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a, _ := newTable(t, nil)
	b, err := New(Config{Epoch: [EpochLen]byte{8, 7, 6, 5, 4, 3, 2, 1}, Alloc: secmem.New(nil)})
	is.NoErr(err)
	defer b.Close()
	st := stage(t, a, "inv-s", time.Minute)
	_, _, err = b.Lookup(st.Handle)
	is.Equal(wire.CodeOf(err), secretdapi.CodeLeaseStaleEpoch)
}

// TestTombstoneCap: tombstones stay under 4×MaxLeases, oldest evicted first.
func TestTombstoneCap(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	tb, _ := newTable(t, nil) // MaxLeases 100
	var first []byte
	for i := range 450 {
		st := stage(t, tb, "inv-cap", time.Minute)
		if i == 0 {
			first = st.Handle
		}
		res, err := tb.Consume("inv-cap", [][]byte{st.Handle}, consumer)
		is.NoErr(err)
		res.Leases[0].Value.Free()
	}
	_, tombs := tb.Counts()
	is.Equal(tombs, 400)
	res, _ := tb.Consume("inv-cap", [][]byte{first}, consumer)
	is.Equal(wire.CodeOf(res.Err()), secretdapi.CodeLeaseNotFound) // evicted
	tb.Sweep()
	is.Equal(len(tb.tombQ), 400)
}
