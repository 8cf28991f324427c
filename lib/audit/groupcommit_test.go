package audit

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

// Concurrent appenders with FsyncAlways share fsyncs (group commit) while
// the log rotates under them: every Append returns only after its line is
// durable, the chain verifies across files, and Close after them works.
func TestGroupCommitWithRotation(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, Daemon: "t", Fsync: FsyncAlways, MaxBytes: 4 << 10, MaxFiles: 100})
	is.NoErr(err)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				if _, err := l.Append(context.Background(), Record{Op: "t.op", Outcome: OutcomeOK, Fields: map[string]any{"g": g, "i": i}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		is.NoErr(err)
	}
	is.NoErr(l.Close())
	rep, err := Verify(dir, "audit.jsonl")
	is.NoErr(err)
	is.Equal(rep.Records, 16*40)
	is.True(rep.Files > 3) // it rotated while the writers ran
}

// AppendLazy writes its record at once without syncing it; the next
// Append's sync covers it too, and the chain holds both.
func TestAppendLazy(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir, l := openSynced(t)
	ctx := context.Background()
	synced := func() uint64 { return syncedLines(l) }
	s1, err := l.AppendLazy(ctx, Record{Op: "t.read", Outcome: OutcomeOK})
	is.NoErr(err)
	is.Equal(s1, uint64(1))
	is.Equal(synced(), uint64(0)) // written, not synced
	lines := readLines(t, filepath.Join(dir, "audit.jsonl"))
	is.Equal(len(lines), 2)                         // one line and what follows its newline
	is.True(strings.Contains(lines[0], `"t.read"`)) // in the file already: a crash of the process loses nothing

	s2, err := l.Append(ctx, Record{Op: "t.change", Outcome: OutcomeOK})
	is.NoErr(err)
	is.Equal(s2, uint64(2))
	is.Equal(synced(), uint64(2)) // one sync made both durable

	_, err = l.AppendLazy(ctx, Record{Op: ""})
	is.Equal(wire.CodeOf(err), CodeInvalid) // checked as Append checks
	is.NoErr(l.Close())
	rep, err := Verify(dir, "audit.jsonl")
	is.NoErr(err)
	is.Equal(rep.Records, 2)
}

// A lazy pair (BeginLazy, EndLazy) is written at once and made durable by
// Sync; its records chain and link as a synced pair's do.
func TestLazyPair(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir, l := openSynced(t)
	ctx := context.Background()
	synced := func() uint64 { return syncedLines(l) }
	p, err := l.BeginLazy(ctx, Record{Op: "t.change"})
	is.NoErr(err)
	is.Equal(synced(), uint64(0))
	is.NoErr(l.Sync()) // what a caller does before it acts
	is.Equal(synced(), uint64(1))
	seq, err := p.EndLazy(ctx, OutcomeOK, "", map[string]any{"k": "v"})
	is.NoErr(err)
	is.Equal(seq, uint64(2))
	is.Equal(synced(), uint64(1))
	is.NoErr(l.Sync()) // before the answer
	is.Equal(synced(), uint64(2))
	_, err = p.EndLazy(ctx, OutcomePending, "", nil)
	is.Equal(wire.CodeOf(err), CodeInvalid)
	is.NoErr(l.Close())
	rep, err := Verify(dir, "audit.jsonl")
	is.NoErr(err)
	is.Equal(rep.Records, 2)
	lines := readLines(t, filepath.Join(dir, "audit.jsonl"))
	is.True(strings.Contains(lines[0], `"phase":"before"`))
	is.True(strings.Contains(lines[1], `"before_seq":1`))
}

// syncedLines is how many of l's lines are known durable.
func syncedLines(l *Log) uint64 {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	return l.synced
}

// openSynced opens a log that syncs every Append (FsyncAlways) in a
// fresh directory.
func openSynced(t *testing.T) (string, *Log) {
	t.Helper()
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, Daemon: "t", Fsync: FsyncAlways})
	if err != nil {
		t.Fatal(err)
	}
	return dir, l
}
