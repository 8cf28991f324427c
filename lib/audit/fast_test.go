package audit

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// fastAndGeneral encodes r both ways: appendTail between appendHead and
// appendPrev (ok false when r needs the general path), and scrubRecord
// then marshalLine.
func fastAndGeneral(t testing.TB, l *Log, r Record, beforeSeq uint64) (fast []byte, ok bool, general []byte) {
	t.Helper()
	seq, tm, prev := uint64(41), time.Date(2026, 11, 29, 12, 0, 0, 120000000, time.UTC), ZeroPrev
	f := r
	f.Op, f.Code, f.Corr = l.text(f.Op), l.text(f.Code), l.text(f.Corr)
	tail, ok := l.appendTail(nil, &f, beforeSeq)
	if ok {
		head, hok := appendHead(nil, seq, tm)
		if !hok {
			t.Fatal("appendHead refused a valid time")
		}
		fast = appendPrev(append(head, tail...), prev)
	}
	g, err := l.scrubRecord(mergedFields(r, beforeSeq))
	if err != nil {
		t.Fatal(err)
	}
	g.Seq, g.Time, g.Daemon, g.Prev = seq, tm, l.opts.Daemon, prev
	general, err = marshalLine(g)
	if err != nil {
		t.Fatal(err)
	}
	return fast, ok, general
}

// TestTailMatchesGeneralPath checks that records encoded straight from the
// caller's map are byte for byte what the general path (a scrubbed copy,
// then marshalLine) writes, scrubbed values and before_seq included.
func TestTailMatchesGeneralPath(t *testing.T) {
	t.Parallel()
	sc := redact.NewScrubber()
	sc.Register([]byte(canary))
	uncached := &Log{opts: Options{Daemon: "egressd\u2028", Scrubber: sc}}
	cached := &Log{opts: uncached.opts, keys: redact.NewKeyCache(sc)}
	hostile := "a\"b\\c\x00\x1f\n\t<>&\u2028\xff é"
	tests := []struct {
		name      string
		r         Record
		beforeSeq uint64
		fast      bool
	}{
		{"no fields", Record{Op: "x", Outcome: OutcomeOK}, 0, true},
		{"empty fields", Record{Op: "x", Outcome: OutcomeOK, Fields: map[string]any{}}, 0, true},
		{"before_seq alone", Record{Op: "x", Phase: PhaseAfter, Outcome: OutcomeOK}, 9, true},
		{"before_seq replaces", Record{Op: "x", Outcome: OutcomeOK, Fields: map[string]any{"before_seq": "caller's", "a": 1}}, 7, true},
		{"before_seq kept without End", Record{Op: "x", Outcome: OutcomeOK, Fields: map[string]any{"before_seq": "caller's"}}, 0, true},
		{"egress request", Record{Actor: Actor{UID: -1}, Op: "egress.request", Phase: PhaseBefore, Outcome: OutcomePending, Corr: "c-1",
			Fields: map[string]any{"invocation": "bench", "method": "GET", "origin": "http://127.0.0.1:8080", "path": "/bench",
				"address": "127.0.0.1:8080", "attached": []string{"gh"}, "status": 200, "bytes_out": uint64(120), "bytes_in": uint64(64),
				"duration_ms": int64(3), "via": "tcp"}}, 0, true},
		{"scrubbed values", Record{Op: "lease." + canary, Code: "x." + canary, Corr: canary, Outcome: OutcomeError,
			Fields: map[string]any{"v": "echo " + canary, "url": "https://u:" + canary + "@h/?access_token=x", "auth": "Bearer abc",
				"list": []string{canary, "password=hunter2", hostile}, "nil list": []string(nil), "empty": []string{}}}, 3, true},
		{"every integer", Record{Op: "x", Outcome: OutcomeOK, Fields: map[string]any{"i": -1, "i8": int8(-8), "i16": int16(-16),
			"i32": int32(-32), "i64": int64(-1 << 62), "u": uint(1), "u8": uint8(8), "u16": uint16(16), "u32": uint32(32),
			"u64": uint64(1 << 63), "t": true, "f": false, "n": nil, hostile: hostile}}, 0, true},
		{"key changed by scrubbing", Record{Op: "x", Outcome: OutcomeOK, Fields: map[string]any{canary: "v"}}, 0, false},
		{"key changed by the policy", Record{Op: "x", Outcome: OutcomeOK, Fields: map[string]any{"token=abc": "v"}}, 0, false},
		{"nested map", Record{Op: "x", Outcome: OutcomeOK, Fields: map[string]any{"m": map[string]any{"a": canary}}}, 0, false},
		{"struct", Record{Op: "x", Outcome: OutcomeOK, Fields: map[string]any{"s": struct{ A string }{canary}}}, 2, false},
		{"bytes", Record{Op: "x", Outcome: OutcomeOK, Fields: map[string]any{"b": []byte(canary)}}, 0, false},
		{"attrs sorted", Record{Op: "x", Outcome: OutcomeOK, Attrs: []slog.Attr{slog.String("a", "echo "+canary),
			slog.Any("l", []string{canary, "x"}), slog.Any("nil", []string(nil)), slog.Int64("n", -3), slog.Uint64("u", 1<<63),
			slog.Bool("z", true)}}, 5, true},
		{"attrs unsorted, replacing fields", Record{Op: "x", Outcome: OutcomeOK, Fields: map[string]any{"b": "field", "c": 1, "before_seq": 1},
			Attrs: []slog.Attr{slog.String("z", "last"), slog.String("b", "attr"), slog.Int("a", 2), slog.String("b", "later attr")}}, 9, true},
		{"attr before_seq without End", Record{Op: "x", Outcome: OutcomeOK, Attrs: []slog.Attr{slog.String("before_seq", "mine")}}, 0, true},
		{"attr float", Record{Op: "x", Outcome: OutcomeOK, Attrs: []slog.Attr{slog.Float64("f", 1.5)}}, 0, false},
		{"attr duration and time", Record{Op: "x", Outcome: OutcomeOK, Attrs: []slog.Attr{slog.Duration("d", time.Second),
			slog.Time("t", time.Unix(1, 0).UTC())}}, 0, false},
		{"attr uids", Record{Op: "x", Outcome: OutcomeOK, Attrs: []slog.Attr{slog.Any("listener_uids", []uint32{0, 1000})}}, 2, false},
		{"attr key scrubbed", Record{Op: "x", Outcome: OutcomeOK, Attrs: []slog.Attr{slog.String(canary, "v")}}, 0, false},
	}
	// Without a key cache, and with one: empty, then holding the keys.
	for _, run := range []struct {
		name string
		l    *Log
	}{{"uncached", uncached}, {"cache filling", cached}, {"cache filled", cached}} {
		for _, tt := range tests {
			t.Run(run.name+"/"+tt.name, func(t *testing.T) {
				is := is.New(t)
				fast, ok, general := fastAndGeneral(t, run.l, tt.r, tt.beforeSeq)
				is.Equal(ok, tt.fast)
				if ok {
					is.Equal(string(fast), string(general))
				}
				is.True(!bytes.Contains(general, []byte(canary)))
			})
		}
	}
}

// TestTailKeyRegisteredLater: a field key the fast path has seen clean
// (and cached) is scrubbed once it is registered as a value — the record
// takes the general path, which writes the key redacted — and is written
// as it is again once unregistered.
func TestTailKeyRegisteredLater(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	opts.Scrubber = redact.NewScrubber()
	l := mustOpen(t, opts)
	ctx := context.Background()
	r := Record{Op: "x", Outcome: OutcomeOK, Fields: map[string]any{"origin-name": "v"}, Attrs: []slog.Attr{slog.String("method-name", "GET")}}
	_, err := l.Append(ctx, r)
	is.NoErr(err)
	unreg := opts.Scrubber.Register([]byte("origin-name"))
	unreg2 := opts.Scrubber.Register([]byte("method-name"))
	_, ok := l.appendTail(nil, &r, 0)
	is.True(!ok) // keys now change under scrubbing: general path
	_, err = l.Append(ctx, r)
	is.NoErr(err)
	unreg()
	unreg2()
	_, ok = l.appendTail(nil, &r, 0)
	is.True(ok)
	_, err = l.Append(ctx, r)
	is.NoErr(err)
	recs, err := ReadTail(opts.Dir, DefaultName, 3)
	is.NoErr(err)
	is.Equal(recs[0].Fields["origin-name"], "v")
	is.Equal(len(recs[1].Fields), 1) // both keys became Redacted (which value stays is the general path's map order)
	is.True(recs[1].Fields[redact.Redacted] == "GET" || recs[1].Fields[redact.Redacted] == "v")
	is.Equal(recs[2].Fields["origin-name"], "v")
	is.Equal(recs[2].Fields["method-name"], "GET")
	data, err := os.ReadFile(filepath.Join(opts.Dir, DefaultName))
	is.NoErr(err)
	is.Equal(bytes.Count(data, []byte("origin-name")), 2)
}

// FuzzTail compares the two encoders on arbitrary keys and values.
func FuzzTail(f *testing.F) {
	f.Add("k", "v\u2028\x00<", "https://u:p@h")
	f.Add("\xff", canary, "password=x")
	f.Fuzz(func(t *testing.T, k, v, w string) {
		sc := redact.NewScrubber()
		sc.Register([]byte(canary))
		l := &Log{opts: Options{Daemon: "d", Scrubber: sc}, keys: redact.NewKeyCache(sc)}
		r := Record{Op: v, Outcome: OutcomeOK, Corr: w, Fields: map[string]any{k: v, "l": []string{k, v, w}, "w": w},
			Attrs: []slog.Attr{slog.String(w, k), slog.Any("l", []string{v}), slog.Int(k, len(v))}}
		for range 2 { // the key cache filling, then filled
			fast, ok, general := fastAndGeneral(t, l, r, uint64(len(k)))
			if ok && !bytes.Equal(fast, general) {
				t.Fatalf("fast    %s\ngeneral %s", fast, general)
			}
		}
		// A key registered as a value after it was cached takes the
		// general path, which scrubs it.
		defer sc.Register([]byte(k))()
		if sc.Scrub(k) != k {
			if _, ok := l.appendTail(nil, &r, 0); ok {
				t.Fatalf("key %q registered, fast path still taken", k)
			}
		}
	})
}

// TestFastPathTornAndScrubFailed covers the general path taken under the
// lock: a torn tail to note, and a line in which a registered value
// appears only across JSON syntax.
func TestFastPathTornAndScrubFailed(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	opts.Scrubber = redact.NewScrubber()
	opts.Scrubber.Register([]byte(`x","q`)) // spans a value and the next key
	is.NoErr(os.MkdirAll(opts.Dir, 0o700))
	is.NoErr(os.WriteFile(filepath.Join(opts.Dir, DefaultName), []byte(`{"torn`), 0o600))
	l := mustOpen(t, opts)
	ctx := context.Background()
	_, err := l.Append(ctx, Record{Op: "x", Outcome: OutcomeOK, Fields: map[string]any{"k": "v"}})
	is.NoErr(err)
	_, err = l.Append(ctx, Record{Op: "x", Outcome: OutcomeOK, Fields: map[string]any{"p": "x", "q": "y"}})
	is.NoErr(err)
	recs, err := ReadTail(opts.Dir, DefaultName, 2)
	is.NoErr(err)
	is.Equal(recs[0].Fields["torn_tail"], true)
	is.Equal(recs[0].Fields["k"], "v")
	is.Equal(recs[1].Fields["scrub_failed"], true)
	is.Equal(recs[1].Op, redact.Redacted)
	_, err = Verify(opts.Dir, DefaultName)
	is.NoErr(err)
}

// TestEndWith: an after record from typed attributes reads back as one
// from a map, before_seq included, and the caller's slice is not kept.
func TestEndWith(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	l := mustOpen(t, opts)
	ctx := context.Background()
	attrs := []slog.Attr{slog.String("origin", "https://api.test"), slog.Int("status", 200)}
	p, err := l.Begin(ctx, Record{Op: "egress.request", Attrs: attrs})
	is.NoErr(err)
	attrs[0] = slog.String("origin", "changed after Begin") // reused by the caller
	_, err = p.EndWith(ctx, OutcomeOK, "", map[string]any{"via": "tcp", "status": "replaced"}, attrs)
	is.NoErr(err)
	recs, err := ReadTail(opts.Dir, DefaultName, 2)
	is.NoErr(err)
	is.Equal(recs[0].Fields["origin"], "https://api.test")
	is.Equal(recs[1].Fields["origin"], "changed after Begin")
	is.Equal(recs[1].Fields["status"], any(json1(200)))
	is.Equal(recs[1].Fields["via"], "tcp")
	is.Equal(recs[1].Fields["before_seq"], any(json1(p.Seq)))
	_, err = Pair{}.EndWith(ctx, OutcomeOK, "", nil, nil)
	is.Equal(wire.CodeOf(err), CodeInvalid)
	_, err = Verify(opts.Dir, DefaultName)
	is.NoErr(err)
}

// TestOpRegisteredLater: an op and a code checked clean (and cached, as
// constants) are scrubbed once a value in them is registered, and written
// as they are again once it is unregistered.
func TestOpRegisteredLater(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	opts.Scrubber = redact.NewScrubber()
	l := mustOpen(t, opts)
	ctx := context.Background()
	r := Record{Op: "lease.stage-name", Outcome: OutcomeError, Code: "lease.code-name"}
	for _, register := range []bool{false, true, false} {
		unreg := func() {}
		if register {
			u1, u2 := opts.Scrubber.Register([]byte("stage-name")), opts.Scrubber.Register([]byte("code-name"))
			unreg = func() { u1(); u2() }
		}
		_, err := l.Append(ctx, r)
		unreg()
		is.NoErr(err)
	}
	recs, err := ReadTail(opts.Dir, DefaultName, 3)
	is.NoErr(err)
	is.Equal(recs[0].Op, "lease.stage-name")
	is.Equal(recs[1].Op, "lease."+redact.Redacted)
	is.Equal(recs[1].Code, "lease."+redact.Redacted)
	is.Equal(recs[2].Op, "lease.stage-name")
	is.Equal(recs[2].Code, "lease.code-name")
}
