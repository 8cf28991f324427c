package audit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"go.uber.org/goleak"

	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const canary = "canary-7f3a9c21-secret"

// testOpts returns options for a log in a fresh directory with small files.
func testOpts(t *testing.T) Options {
	t.Helper()
	var mu sync.Mutex
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	return Options{
		Dir:      filepath.Join(t.TempDir(), "log"),
		Daemon:   "secretd",
		MaxBytes: 1200,
		MaxFiles: 20,
		Fsync:    FsyncNever,
		Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			now = now.Add(time.Millisecond)
			return now
		},
	}
}

func mustOpen(t *testing.T, opts Options) *Log {
	t.Helper()
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func appendN(t *testing.T, l *Log, n int) {
	t.Helper()
	for i := range n {
		_, err := l.Append(context.Background(), Record{
			Actor: Actor{UID: 1000, PID: 42}, Op: "lease.stage", Outcome: OutcomeOK,
			Corr: "c-1", Fields: map[string]any{"i": i, "invocation": "inv-abc"},
		})
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
}

// countFiles returns how many files the log has.
func countFiles(t *testing.T, opts Options) int {
	t.Helper()
	files, err := listFiles(opts.Dir, DefaultName)
	if err != nil {
		t.Fatal(err)
	}
	return len(files)
}

func TestCodesSortedUnique(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.True(slices.IsSorted(Codes))
	is.Equal(len(slices.Compact(slices.Clone(Codes))), len(Codes))
}

func TestAppendVerifyRotation(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	l := mustOpen(t, opts)
	appendN(t, l, 40)
	is.True(countFiles(t, opts) >= 4)
	rep, err := Verify(opts.Dir, DefaultName)
	is.NoErr(err)
	is.Equal(rep, Report{Files: countFiles(t, opts), Records: 40, FirstSeq: 1, LastSeq: 40})

	recs, err := ReadTail(opts.Dir, DefaultName, 100)
	is.NoErr(err)
	is.Equal(len(recs), 40)
	is.Equal(recs[0].Prev, ZeroPrev)
	for i, r := range recs {
		is.Equal(r.Seq, uint64(i+1))
		is.Equal(r.Daemon, "secretd")
		is.Equal(r.Time.Location(), time.UTC)
	}
	tail, err := ReadTail(opts.Dir, DefaultName, 15)
	is.NoErr(err)
	is.Equal(tail, recs[25:])

	st, err := os.Stat(opts.Dir)
	is.NoErr(err)
	is.Equal(st.Mode().Perm(), os.FileMode(0o700))
	st, err = os.Stat(filepath.Join(opts.Dir, DefaultName))
	is.NoErr(err)
	is.Equal(st.Mode().Perm(), os.FileMode(0o600))
}

func TestMaxFilesDropsOldest(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	opts.MaxFiles = 2
	appendN(t, mustOpen(t, opts), 40)
	is.Equal(countFiles(t, opts), 3)
	rep, err := Verify(opts.Dir, DefaultName)
	is.NoErr(err)
	is.Equal(rep.LastSeq, uint64(40))
	is.True(rep.FirstSeq > 1)
}

// readLines and writeLines edit a log file as the tamper tests need.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(string(b), "\n")
}

func writeLines(t *testing.T, path string, lines []string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	t.Parallel()
	active := func(dir string) string { return filepath.Join(dir, DefaultName) }
	rotated := func(dir string, n int) string { return rotatedPath(dir, DefaultName, n) }
	tests := []struct {
		name   string
		tamper func(t *testing.T, dir string)
		code   string // "" means still valid
	}{
		{"edited field", func(t *testing.T, dir string) {
			ls := readLines(t, active(dir))
			ls[0] = strings.Replace(ls[0], "inv-abc", "inv-abd", 1)
			writeLines(t, active(dir), ls)
		}, CodeChainBroken},
		{"deleted record", func(t *testing.T, dir string) {
			ls := readLines(t, active(dir))
			writeLines(t, active(dir), append(ls[:1:1], ls[2:]...))
		}, CodeChainBroken},
		{"reordered records", func(t *testing.T, dir string) {
			ls := readLines(t, active(dir))
			ls[0], ls[1] = ls[1], ls[0]
			writeLines(t, active(dir), ls)
		}, CodeChainBroken},
		{"edited rotated file", func(t *testing.T, dir string) {
			ls := readLines(t, rotated(dir, 2))
			ls[1] = strings.Replace(ls[1], `"uid":1000`, `"uid":1001`, 1)
			writeLines(t, rotated(dir, 2), ls)
		}, CodeChainBroken},
		{"deleted middle rotated file", func(t *testing.T, dir string) {
			if err := os.Remove(rotated(dir, 2)); err != nil {
				t.Fatal(err)
			}
		}, CodeChainBroken},
		{"garbage line", func(t *testing.T, dir string) {
			ls := readLines(t, active(dir))
			writeLines(t, active(dir), append([]string{ls[0], "not json\n"}, ls[1:]...))
		}, CodeCorrupt},
		{"edited last record without newline", func(t *testing.T, dir string) {
			ls := readLines(t, active(dir))
			last := len(ls) - 2 // SplitAfter leaves "" at the end
			ls[last] = strings.TrimSuffix(strings.Replace(ls[last], `"uid":1000`, `"uid":0`, 1), "\n")
			writeLines(t, active(dir), ls)
		}, ""}, // the last record has no successor: undetectable by design
		{"deleted oldest rotated file", func(t *testing.T, dir string) {
			files, _ := listFiles(dir, DefaultName)
			if err := os.Remove(files[0].path); err != nil {
				t.Fatal(err)
			}
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			opts := testOpts(t)
			l := mustOpen(t, opts)
			appendN(t, l, 40)
			is.NoErr(l.Close())
			tt.tamper(t, opts.Dir)
			_, err := Verify(opts.Dir, DefaultName)
			if tt.code == "" {
				is.NoErr(err)
				return
			}
			is.Equal(wire.CodeOf(err), tt.code)
			is.True(strings.Contains(err.Error(), "line ")) // names the line
		})
	}
}

func TestReopenContinuesChain(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	opts.MaxBytes = 1 << 20
	l := mustOpen(t, opts)
	appendN(t, l, 5)
	is.NoErr(l.Close())
	_, err := l.Append(context.Background(), Record{Op: "x", Outcome: OutcomeOK})
	is.Equal(wire.CodeOf(err), CodeClosed)

	l = mustOpen(t, opts)
	appendN(t, l, 5)
	is.NoErr(l.Close())
	// A crash between rotation and the next write leaves no active file.
	is.NoErr(os.Rename(filepath.Join(opts.Dir, DefaultName), rotatedPath(opts.Dir, DefaultName, 1)))
	l = mustOpen(t, opts)
	seq, err := l.Append(context.Background(), Record{Op: "x", Outcome: OutcomeOK})
	is.NoErr(err)
	is.Equal(seq, uint64(11))
	rep, err := Verify(opts.Dir, DefaultName)
	is.NoErr(err)
	is.Equal(rep.Records, 11)
	is.Equal(rep.LastSeq, uint64(11))
}

func TestConcurrentAppend(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	opts.MaxFiles = 100
	opts.Fsync = FsyncAlways
	l := mustOpen(t, opts)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 25 {
				if _, err := l.Append(context.Background(), Record{Op: "instance.start", Outcome: OutcomeOK,
					Fields: map[string]any{"g": g, "i": i}}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	rep, err := Verify(opts.Dir, DefaultName)
	is.NoErr(err)
	is.Equal(rep.Records, 400)
	is.Equal(rep.LastSeq, uint64(400))
	is.True(rep.Files > 3)
}

type withSecret struct {
	Name string
	Key  redact.Secret
	Note string
}

func TestCanaryNeverWritten(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	opts.Scrubber = redact.NewScrubber()
	opts.Scrubber.Register([]byte(canary))
	l := mustOpen(t, opts)
	ctx := context.Background()
	_, err := l.Append(ctx, Record{
		Op: "lease." + canary, Code: "x." + canary, Corr: canary, Outcome: OutcomeError,
		Fields: map[string]any{
			"v":      canary,
			canary:   "as a key",
			"nested": map[string]any{"list": []any{"a", canary, fmt.Sprintf("%x", canary)}},
			"struct": withSecret{Name: "n", Key: redact.NewSecret([]byte(canary)), Note: "echo " + canary},
			"url":    "https://user:" + canary + "@h/?access_token=" + canary,
			"bytes":  []byte("user:" + canary),
		},
	})
	is.NoErr(err)
	p, err := l.Begin(ctx, Record{Op: "credential.put", Fields: map[string]any{"x": canary}})
	is.NoErr(err)
	_, err = p.End(ctx, OutcomeOK, "", map[string]any{"y": canary})
	is.NoErr(err)
	b, err := os.ReadFile(filepath.Join(opts.Dir, DefaultName))
	is.NoErr(err)
	is.True(!bytes.Contains(b, []byte(canary)))
	is.True(!bytes.Contains(b, []byte("7f3a9c21")))
	is.True(!opts.Scrubber.Contains(b))
	_, err = Verify(opts.Dir, DefaultName)
	is.NoErr(err)
}

func TestPair(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	l := mustOpen(t, opts)
	ctx := context.Background()
	p, err := l.Begin(ctx, Record{Actor: Actor{UID: 7, PID: 8}, Op: "instance.destroy", Corr: "c9",
		Outcome: OutcomeOK})
	is.NoErr(err)
	seq, err := p.End(ctx, OutcomeError, "instance.not_found", map[string]any{"id": "i1"})
	is.NoErr(err)
	is.Equal(seq, p.Seq+1)
	recs, err := ReadTail(opts.Dir, DefaultName, 2)
	is.NoErr(err)
	is.Equal(recs[0].Phase, PhaseBefore)
	is.Equal(recs[0].Outcome, OutcomePending)
	is.Equal(recs[1].Phase, PhaseAfter)
	is.Equal(recs[1].Op, "instance.destroy")
	is.Equal(recs[1].Corr, "c9")
	is.Equal(recs[1].Actor, Actor{UID: 7, PID: 8})
	is.Equal(recs[1].Code, "instance.not_found")
	is.Equal(recs[1].Fields["before_seq"], any(json1(p.Seq)))
	_, err = Pair{}.End(ctx, OutcomeOK, "", nil)
	is.Equal(wire.CodeOf(err), CodeInvalid)
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	_, err := Open(Options{})
	is.Equal(wire.CodeOf(err), CodeInvalid)
	_, err = Open(Options{Dir: t.TempDir(), Name: "a/b"})
	is.Equal(wire.CodeOf(err), CodeInvalid)
	l := mustOpen(t, testOpts(t))
	for _, r := range []Record{{Outcome: OutcomeOK}, {Op: "x"}, {Op: "x", Outcome: "maybe"},
		{Op: "x", Outcome: OutcomeOK, Phase: "during"},
		{Op: "x", Outcome: OutcomeOK, Fields: map[string]any{"f": func() {}}}} {
		_, err := l.Append(context.Background(), r)
		is.Equal(wire.CodeOf(err), CodeInvalid)
	}
}

func TestReopenAfterRotation(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	l := mustOpen(t, opts)
	appendN(t, l, 20)
	is.NoErr(l.Close())
	l = mustOpen(t, opts)
	appendN(t, l, 20)
	rep, err := Verify(opts.Dir, DefaultName)
	is.NoErr(err)
	is.Equal(rep.Records, 40)
	is.Equal(rep.LastSeq, uint64(40))
	is.True(rep.Files >= 6)
}
