package audit

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/lib/wire"
)

// json1 is how a number in Fields reads back.
func json1(n uint64) json.Number { return json.Number(strconv.FormatUint(n, 10)) }

// appendRaw appends bytes to the active file, as a crash mid-write would.
func appendRaw(t *testing.T, opts Options, b string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(opts.Dir, DefaultName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(b); err != nil {
		t.Fatal(err)
	}
}

func TestTornTail(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	opts.MaxBytes = 1 << 20
	l := mustOpen(t, opts)
	appendN(t, l, 3)
	is.NoErr(l.Close())
	appendRaw(t, opts, `{"seq":4,"time":"2025-01-`)

	rep, err := Verify(opts.Dir, DefaultName) // a crash leaves this: fine
	is.NoErr(err)
	is.Equal(rep.Records, 3)
	is.Equal(rep.Torn, 1)

	l = mustOpen(t, opts)
	seq, err := l.Append(context.Background(), Record{Op: "lease.stage", Outcome: OutcomeOK})
	is.NoErr(err)
	is.Equal(seq, uint64(4))
	appendN(t, l, 2)
	rep, err = Verify(opts.Dir, DefaultName)
	is.NoErr(err)
	is.Equal(rep, Report{Files: 1, Records: 6, FirstSeq: 1, LastSeq: 6, Torn: 1})
	recs, err := ReadTail(opts.Dir, DefaultName, 3)
	is.NoErr(err)
	is.Equal(recs[0].Fields["torn_tail"], true)
	is.Equal(recs[1].Fields["torn_tail"], nil)
}

// TestTornCompleteRecord covers a whole record written without its newline:
// Open chains from the record before it, and Verify accepts that.
func TestTornCompleteRecord(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	opts.MaxBytes = 1 << 20
	l := mustOpen(t, opts)
	appendN(t, l, 4)
	is.NoErr(l.Close())
	path := filepath.Join(opts.Dir, DefaultName)
	b, err := os.ReadFile(path)
	is.NoErr(err)
	is.NoErr(os.WriteFile(path, b[:len(b)-1], 0o600)) // drop the final newline
	l = mustOpen(t, opts)
	seq, err := l.Append(context.Background(), Record{Op: "x", Outcome: OutcomeOK})
	is.NoErr(err)
	is.Equal(seq, uint64(4))
	rep, err := Verify(opts.Dir, DefaultName)
	is.NoErr(err)
	is.Equal(rep.Records, 4)
	is.Equal(rep.Torn, 1)
}

func TestCorruptLastLineRefused(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	l := mustOpen(t, opts)
	appendN(t, l, 2)
	is.NoErr(l.Close())
	appendRaw(t, opts, "garbage\n")
	_, err := Open(opts)
	is.Equal(wire.CodeOf(err), CodeCorrupt)
	_, err = Verify(opts.Dir, DefaultName)
	is.Equal(wire.CodeOf(err), CodeCorrupt)
}
