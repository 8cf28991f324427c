package buildtest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/lib/wire"
)

// The environment of this test binary re-executed as another process
// asking for a binary (childMain).
const (
	envChildCache = "HK_BUILDTEST_CACHE" // the cache directory
	envChildPkg   = "HK_BUILDTEST_PKG"   // the package directory
	envChildFlags = "HK_BUILDTEST_FLAGS" // build flags, separated by newlines
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envChildCache); dir != "" {
		os.Exit(childMain(dir))
	}
	os.Exit(m.Run())
}

// childMain asks for a binary as a separate test process would, logging
// to stderr, and prints its path.
func childMain(dir string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := &Cache{Dir: dir, Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	p, err := c.Binary(ctx, os.Getenv(envChildPkg), strings.Split(os.Getenv(envChildFlags), "\n")...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(p)
	return 0
}

// keyOf returns the key of one target.
func keyOf(ctx context.Context, t *target) (key, error) {
	ks, err := keys(ctx, []*target{t})
	if err != nil {
		return key{}, err
	}
	return ks[0], nil
}

// hello writes a module with a main package that prints mid.Msg(),
// which returns dep.Msg(), and returns its directory; a second main
// package, cmd/second, prints the same. Neither Msg is inlined, so a
// change of dep's body changes dep's object code but neither its export
// data nor mid's object code: only dep's own build ID shows it.
func hello(t *testing.T, msg string) string {
	t.Helper()
	dir := t.TempDir()
	const mainGo = "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/hello/mid\"\n)\n\nfunc main() { fmt.Println(mid.Msg()) }\n"
	files := map[string]string{
		"go.mod":          "module example.com/hello\n\ngo 1.26\n",
		"main.go":         mainGo,
		"cmd/second/m.go": mainGo,
		"mid/mid.go":      "package mid\n\nimport \"example.com/hello/dep\"\n\n//go:noinline\nfunc Msg() string { return dep.Msg() }\n",
		"dep/dep.go":      "package dep\n\n//go:noinline\nfunc Msg() string { return \"" + msg + "\" }\n",
		"other/o.go":      "package other\n\nfunc Unused() int { return 1 }\n",
		"t.go":            "//go:build never\n\npackage main\n",
	}
	for name, body := range files {
		write(t, filepath.Join(dir, name), body)
	}
	return dir
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// linkCounter writes a -toolexec program that appends a line to the
// returned file each time the go command runs the linker to link (not
// to ask its version), so a test can count the builds that happened,
// in every process.
func linkCounter(t *testing.T) (toolexec, marker string) {
	t.Helper()
	dir := t.TempDir()
	marker = filepath.Join(dir, "links")
	toolexec = filepath.Join(dir, "toolexec")
	script := "#!/bin/sh\ncase \"$1\" in\n*/link) [ \"$2\" = -V=full ] || echo link >>" + marker + " ;;\nesac\nexec \"$@\"\n"
	if err := os.WriteFile(toolexec, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return toolexec, marker
}

// links returns how many links linkCounter counted.
func links(t *testing.T, marker string) int {
	t.Helper()
	b, err := os.ReadFile(marker)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// run runs a built binary and returns what it printed.
func run(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
	return strings.TrimSpace(string(out))
}

// syncBuf is a bytes.Buffer safe for concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBuildOnce asks for one binary from several goroutines of this
// process and several other processes at once, all of them made to wait
// for the key's lock (held by the test until each logged that it waits):
// exactly one links it, and all get the same path. A later call reuses
// it without linking; the refused side is TestKey's changed sources.
func TestBuildOnce(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := t.Context()
	src := hello(t, "one")
	toolexec, marker := linkCounter(t)
	flags := []string{"-toolexec", toolexec}
	logs := &syncBuf{}
	c := &Cache{Dir: t.TempDir(), Log: slog.New(slog.NewTextHandler(logs, nil))}

	// Hold the key's lock so that every caller has to wait for it.
	tg, err := newTarget(src, flags)
	is.NoErr(err)
	k, err := keyOf(ctx, tg)
	is.NoErr(err)
	root, err := c.root()
	is.NoErr(err)
	release, err := lock(ctx, filepath.Join(root, k.hash+lockSuffix), nil)
	is.NoErr(err)

	const goroutines, procs = 4, 3
	paths := make(chan string, goroutines+procs)
	errs := make(chan error, goroutines+procs)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			p, err := c.Binary(ctx, src, flags...)
			paths <- p
			errs <- err
		})
	}
	self, err := os.Executable()
	is.NoErr(err)
	var childErr [procs]*syncBuf
	for i := range procs {
		cmd := exec.CommandContext(ctx, self)
		cmd.Env = append(os.Environ(), envChildCache+"="+c.Dir, envChildPkg+"="+src, envChildFlags+"="+strings.Join(flags, "\n"))
		childErr[i] = &syncBuf{}
		cmd.Stderr = childErr[i]
		wg.Go(func() {
			out, err := cmd.Output()
			paths <- strings.TrimSpace(string(out))
			if err != nil {
				err = fmt.Errorf("child: %v\n%s", err, childErr[i])
			}
			errs <- err
		})
	}
	waiting := func() int {
		n := strings.Count(logs.String(), "buildtest.wait")
		for _, b := range childErr {
			n += strings.Count(b.String(), "buildtest.wait")
		}
		return n
	}
	for waiting() < goroutines+procs {
		select {
		case <-ctx.Done():
			t.Fatalf("only %d of %d callers waited for the lock", waiting(), goroutines+procs)
		case <-time.After(20 * time.Millisecond):
		}
	}
	is.Equal(links(t, marker), 0) // no one built while the lock was held
	release()
	wg.Wait()
	close(paths)
	close(errs)
	for err := range errs {
		is.NoErr(err)
	}
	want := filepath.Join(root, k.hash, "hello")
	for p := range paths {
		is.Equal(p, want) // every caller got the one path
	}
	is.Equal(links(t, marker), 1) // linked once for all of them
	is.Equal(run(t, want), "one")
	fi, err := os.Stat(want)
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o555)) // shared, so read-only

	p, err := c.Binary(ctx, src, flags...)
	is.NoErr(err)
	is.Equal(p, want)
	is.Equal(links(t, marker), 1) // reused, not linked again
	leftovers, err := filepath.Glob(filepath.Join(root, k.hash, ".*"))
	is.NoErr(err)
	is.Equal(len(leftovers), 0) // no temporary file left
}

// TestKey changes one input at a time: a change to anything the binary
// is built from gives a new key, a change outside it does not.
func TestKey(t *testing.T) {
	t.Parallel()
	tagged := func(t *testing.T, dir string) {
		write(t, filepath.Join(dir, "t.go"), "//go:build never\n\npackage main\n\nvar y = 2\n")
	}
	tests := []struct {
		name          string
		change        func(t *testing.T, dir string) // nil: none
		before, after []string                       // build flags
		same          bool
	}{
		{name: "nothing", same: true},
		{name: "package outside the binary", change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "other/o.go"), "package other\n\nfunc Unused() int { return 2 }\n")
		}, same: true},
		{name: "dependency function body", change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "dep/dep.go"), "package dep\n\n//go:noinline\nfunc Msg() string { return \"two\" }\n")
		}},
		{name: "main package", change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "main2.go"), "package main\n\nvar x = 1\n")
		}},
		{name: "file under a tag, tag set", change: tagged, before: []string{"-tags", "never"}, after: []string{"-tags", "never"}},
		{name: "file under a tag, tag unset", change: tagged, same: true},
		{name: "race", after: []string{"-race"}},
		{name: "linker flag", after: []string{"-ldflags", "-s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			ctx := t.Context()
			dir := hello(t, "one")
			before, err := newTarget(dir, tt.before)
			is.NoErr(err)
			k1, err := keyOf(ctx, before)
			is.NoErr(err)
			if tt.change != nil {
				tt.change(t, dir)
			}
			after, err := newTarget(dir, tt.after)
			is.NoErr(err)
			k2, err := keyOf(ctx, after)
			is.NoErr(err)
			is.Equal(k1.name, "hello")
			is.Equal(k1.hash == k2.hash, tt.same)
		})
	}
}

// TestChangedSourceRebuilt: after a change of a dependency's function
// body, Binary returns a new binary that has the change, and the old
// one stays for a test process still running it.
func TestChangedSourceRebuilt(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := t.Context()
	src := hello(t, "one")
	c := &Cache{Dir: t.TempDir()}
	p1, err := c.Binary(ctx, src)
	is.NoErr(err)
	is.Equal(run(t, p1), "one")
	write(t, filepath.Join(src, "dep/dep.go"), "package dep\n\n//go:noinline\nfunc Msg() string { return \"two\" }\n")
	p2, err := c.Binary(ctx, src)
	is.NoErr(err)
	is.True(p1 != p2)
	is.Equal(run(t, p2), "two")
	is.Equal(run(t, p1), "one")
}

// TestBinaries: keys asked for together equal those asked for one at a
// time — one go list for two packages of a module, and a go list each
// for packages of two modules the go command cannot resolve together —
// so a TestMain that asks for several shares binaries with one that asks
// for one.
func TestBinaries(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := t.Context()
	a, b := hello(t, "one"), hello(t, "two")
	second := filepath.Join(a, "cmd", "second")
	c := &Cache{Dir: t.TempDir()}

	one := func(dir string) key {
		tg, err := newTarget(dir, nil)
		is.NoErr(err)
		k, err := keyOf(ctx, tg)
		is.NoErr(err)
		return k
	}
	together := &target{pkg: "a, second", dir: a, flags: []string{"-buildvcs=false"}}
	ks, err := together.listKeys(ctx, []string{a, second})
	is.NoErr(err)
	is.Equal(ks, []key{one(a), one(second)}) // one go list, the same keys
	is.Equal(ks[1].name, "second")
	_, err = (&target{pkg: "a, b", flags: []string{"-buildvcs=false"}}).listKeys(ctx, []string{a, b})
	is.True(err != nil) // two modules outside the workspace: not together

	paths, err := c.Binaries(ctx, []string{a, second, b})
	is.NoErr(err)
	is.Equal(len(paths), 3)
	is.Equal(filepath.Base(paths[1]), "second")
	for i, want := range []string{"one", "one", "two"} {
		is.Equal(run(t, paths[i]), want)
	}
	p, err := c.Binary(ctx, b)
	is.NoErr(err)
	is.Equal(p, paths[2]) // the same entry
}

// TestBinaryErrors: what cannot name one binary is refused before any
// build, and a package that does not compile reports the compiler's
// message.
func TestBinaryErrors(t *testing.T) {
	t.Parallel()
	src := hello(t, "one")
	broken := hello(t, "one")
	write(t, filepath.Join(broken, "dep/dep.go"), "package dep\n\nfunc Msg() string { return 1 }\n")
	tests := []struct {
		name  string
		pkg   string
		flags []string
		code  string
		msg   string // a part of the message
	}{
		{name: "no package", pkg: "", code: CodeInvalid},
		{name: "output flag", pkg: src, flags: []string{"-o", "x"}, code: CodeInvalid},
		{name: "output flag with value", pkg: src, flags: []string{"-o=x"}, code: CodeInvalid},
		{name: "not main", pkg: filepath.Join(src, "dep"), code: CodeInvalid, msg: "not a main package"},
		{name: "compile error", pkg: broken, code: CodeBuild, msg: "dep.go:3"},
		{name: "no such directory", pkg: filepath.Join(src, "missing"), code: CodeBuild},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			cache := t.TempDir()
			_, err := (&Cache{Dir: cache}).Binary(t.Context(), tt.pkg, tt.flags...)
			is.Equal(wire.CodeOf(err), tt.code)
			is.True(strings.Contains(err.Error(), tt.msg))
			left, _ := os.ReadDir(cache)
			for _, e := range left {
				is.True(strings.HasSuffix(e.Name(), lockSuffix) || e.IsDir()) // no binary
				if e.IsDir() {
					inside, _ := os.ReadDir(filepath.Join(cache, e.Name()))
					is.Equal(len(inside), 0)
				}
			}
		})
	}
}

// TestBinaryWaitEndsWithContext: a caller waiting for another's build
// gives up when its context ends.
func TestBinaryWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := t.Context()
	src := hello(t, "one")
	c := &Cache{Dir: t.TempDir()}
	tg, err := newTarget(src, nil)
	is.NoErr(err)
	k, err := keyOf(ctx, tg)
	is.NoErr(err)
	root, err := c.root()
	is.NoErr(err)
	release, err := lock(ctx, filepath.Join(root, k.hash+lockSuffix), nil)
	is.NoErr(err)
	defer release()
	logs := &syncBuf{}
	c.Log = slog.New(slog.NewTextHandler(logs, nil))
	short, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for !strings.Contains(logs.String(), "buildtest.wait") && short.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		stop() // once it waits
	}()
	_, err = c.Binary(short, src)
	is.Equal(err, context.Canceled)
	_, err = os.Stat(filepath.Join(root, k.hash))
	is.True(os.IsNotExist(err)) // nothing built
}
