//go:build linux

// Command helper-bench measures the containerization-helper against runc
// called directly, in one run (figures: bench/RESULTS.md,
// "containerization-helper"):
//
//  1. create+start+delete of a busybox container, alternating (a) runc
//     directly — `create --bundle B --pid-file P id` with the console log
//     as stdout and stderr, `start id`, then the helper's own delete:
//     `kill id 15` (SIGTERM, as the helper's stop), a wait for the init to exit, `delete id` — on a bundle
//     prepared as the helper prepares its own (the config.json of a
//     helper-made bundle, over the same read-only cached rootfs, apart
//     from the cgroup path), (b) the same through the helper's socket with
//     lib/api/helperapi (plan+create, plan+start, plan+delete with force),
//     and (c), for reference, runc directly with `delete --force`. Target:
//     p50 (b) ≤ 1.15 × p50 (a).
//  2. runtime.observe with 100 owned containers (created, not started)
//     against `runc list --format json` of the same root. Target: observe
//     p50 ≤ 150 ms.
//
// It builds the helper from ../../cmd/containerization-helper, builds the
// fixture image with umoci CLI calls, runs the helper under a fresh -root
// in -base with this binary on its allowlist, and removes everything it
// made. Run it as root, from this directory:
//
//	GOWORK=off go run . -n 20
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "helper-bench:", err)
		os.Exit(1)
	}
}

// Targets (docs/containerization-helper.md, "Figures").
const (
	targetRatio   = 1.15
	targetObserve = 150 * time.Millisecond
)

func run() error {
	n := flag.Int("n", 20, "cycles per arm")
	owned := flag.Int("owned", 100, "containers for the observe measurement (at least 1)")
	calls := flag.Int("calls", 15, "observe (and runc list) calls to time")
	base := flag.String("base", "/tmp", "directory for the helper's -root and the direct runs (on the disk: the helper fsyncs its state)")
	trace := flag.Bool("trace", false, "print each helper cycle's create, start and delete times, and run the helper with -log-level info")
	tmpfs := flag.String("tmpfs", "", "comma-separated parts of the helper's -root to put on a tmpfs, to tell their fsyncs apart: log (the audit log), store (state.json)")
	auditFsync := flag.String("audit-fsync", "always", "the helper's -audit-fsync (always is its default)")
	bin := flag.String("helper", "", "containerization-helper binary (default: build ../../cmd/containerization-helper)")
	flag.Parse()
	if *owned < 1 || *calls < 1 || *n < 1 {
		return fmt.Errorf("-n, -owned and -calls must be at least 1")
	}
	if os.Geteuid() != 0 {
		return errors.New("run as root: runc and umoci need it")
	}
	// Container inits are reparented here when runc exits; reap them.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("subreaper: %w", err)
	}
	root, err := os.MkdirTemp(*base, "hkhb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	// Runs after the helper stopped, on every return: containers left by
	// an interrupted or failed run are deleted, not orphaned.
	defer sweep(filepath.Join(root, "direct", "root"), filepath.Join(root, "h", "state", "helper", "runtime"))
	if *bin == "" {
		*bin = filepath.Join(root, "bin", "containerization-helper")
		build := exec.Command("go", "build", "-o", *bin, ".")
		build.Dir = filepath.Join("..", "..", "cmd", "containerization-helper")
		build.Env = append(os.Environ(), "GOWORK=off")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	img, err := buildImage(filepath.Join(root, "img"))
	if err != nil {
		return fmt.Errorf("fixture image: %w", err)
	}
	sctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sctx, 30*time.Minute)
	defer cancel()
	for _, part := range strings.FieldsFunc(*tmpfs, func(r rune) bool { return r == ',' }) {
		dir := map[string]string{"log": "log", "store": "state/helper/store"}[part]
		if dir == "" {
			return fmt.Errorf("-tmpfs: unknown part %q (log, store)", part)
		}
		dir = filepath.Join(root, "h", dir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0700,size=64m"); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
		}
		defer unix.Unmount(dir, unix.MNT_DETACH)
	}
	var extra []string
	if *auditFsync != "always" {
		extra = []string{"-audit-fsync", *auditFsync}
	}
	h, err := startHelper(ctx, *bin, filepath.Join(root, "h"), *trace, extra...)
	if err != nil {
		return err
	}
	defer h.stop()
	var la [3]float64
	loadavg(&la)
	fmt.Printf("helper-bench: %s, runc %s, load average %.2f %.2f %.2f, %d cycles per arm, -root in %s (tmpfs: %q), helper -audit-fsync %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runcVersion(), la[0], la[1], la[2], *n, *base, *tmpfs, *auditFsync)

	ok1, err := lifecycle(ctx, h, img, filepath.Join(root, "direct"), *n, *trace)
	if err != nil {
		return err
	}
	ok2, err := observe(ctx, h, img, *owned, *calls)
	if err != nil {
		return err
	}
	loadavg(&la)
	fmt.Printf("load average after: %.2f %.2f %.2f\n", la[0], la[1], la[2])
	if !ok1 || !ok2 {
		fmt.Println("RESULT: FAIL")
		return errors.New("a target was not met")
	}
	fmt.Println("RESULT: PASS")
	return nil
}

// sweep force-deletes every container in the runc roots (those a run
// left behind when it was interrupted or failed) and reaps their inits,
// adopted by this process as a child subreaper.
func sweep(roots ...string) {
	for _, root := range roots {
		out, err := exec.Command(runcPath, "--root", root, "list", "-q").Output()
		if err != nil {
			continue // no such root: nothing was made there
		}
		for _, id := range strings.Fields(string(out)) {
			if err := exec.Command(runcPath, "--root", root, "delete", "--force", id).Run(); err != nil {
				fmt.Fprintf(os.Stderr, "helper-bench: cleanup: runc delete --force %s: %v\n", id, err)
			}
		}
	}
	for {
		if pid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil); pid <= 0 || err != nil {
			return
		}
	}
}

// loadavg reads /proc/loadavg.
func loadavg(la *[3]float64) {
	b, err := os.ReadFile("/proc/loadavg")
	if err == nil {
		fmt.Sscanf(string(b), "%f %f %f", &la[0], &la[1], &la[2])
	}
}

// runcVersion is the first line's version of `runc --version`.
func runcVersion() string {
	out, err := exec.Command(runcPath, "--version").Output()
	if err != nil {
		return "?"
	}
	var v string
	fmt.Sscanf(string(out), "runc version %s", &v)
	return v
}
