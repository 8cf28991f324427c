package audit

import (
	"context"
	"sync"
	"testing"

	"github.com/matryer/is"
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
