package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// testEnv is the whole environment of a validation program: nothing is
// inherited. RUNTIME and TMPDIR are added per test.
var testEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}

// maxOutput caps how much of a test's stdout is parsed (bytes).
const maxOutput = 16 << 20

// runTest runs one validation program against p in dir (created here,
// removed by the caller; fixedCgroup: the test uses the suite's fixed
// cgroup paths and holds the lock that serializes them): dir/rt is the RUNTIME wrapper, dir/root the
// runtime's private root, dir/tmp the TMPDIR that receives the bundles.
// The program runs in its own process group with a cleared environment and
// files (never pipes) for stdio; at the timeout, or when ctx ends, the
// whole group is killed. Whatever the test left is cleaned up after.
func runTest(ctx context.Context, s *Suite, p *Provider, test, dir string, timeout time.Duration, fixedCgroup bool) TestResult {
	res := TestResult{Name: test, ExitCode: -1}
	start := time.Now()
	root, tmp := filepath.Join(dir, "root"), filepath.Join(dir, "tmp")
	rt, stdout, stderr := filepath.Join(dir, "rt"), filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	if err := setup(p, dir, root, tmp, rt); err != nil {
		res.Reason = "harness: " + err.Error()
		res.Cleanup = append(res.Cleanup, res.Reason)
		return res
	}
	exitCode, timedOut, err := execGroup(ctx, s.Programs[test], s.Bin,
		append(testEnv, "RUNTIME="+rt, "TMPDIR="+tmp), stdout, stderr, timeout)
	if err != nil {
		res.Reason = "harness: " + err.Error()
		res.Cleanup = append(res.Cleanup, res.Reason)
		return res
	}
	out, _ := readCapped(stdout, maxOutput)
	errOut, _ := readCapped(stderr, maxOutput)
	v := Judge(ParseTAP(out), exitCode, timedOut, timeout)
	res.Passed, res.ZeroCheck, res.TimedOut, res.ExitCode = v.Passed, v.ZeroCheck, timedOut, exitCode
	res.Checks, res.NotOK, res.Skipped, res.Reason = v.Checks, v.NotOK, v.Skipped, v.Reason()
	res.PassedChecks, res.FailedChecks = v.PassedChecks, v.FailedChecks
	if !v.Passed {
		res.StderrTail = tail(string(errOut), 6)
	}
	// Cleanup runs even when ctx ended: nothing may be left behind.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	res.Leftovers, res.LeftoverMounts, res.Cleanup = cleanup(cctx, rt, root, dir, fixedCgroup)
	if res.PassedChecks == nil {
		res.PassedChecks = []string{}
	}
	res.DurationMS = time.Since(start).Milliseconds()
	return res
}

func setup(p *Provider, dir, root, tmp, rt string) error {
	// dir and tmp must be searchable by others: a container with a user
	// namespace maps root to another uid, which must reach its bundle.
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o711}, {root, 0o700}, {tmp, 0o711}} {
		if err := os.Mkdir(d.path, d.mode); err != nil {
			return err
		}
		if err := os.Chmod(d.path, d.mode); err != nil { // past the umask
			return err
		}
	}
	script, err := p.Wrapper(root, filepath.Join(dir, "runtime.log"))
	if err != nil {
		return err
	}
	return os.WriteFile(rt, []byte(script), 0o700)
}

// execGroup runs exe in its own process group with stdio to files and
// returns its exit code; at the timeout or when ctx ends it kills the
// group (SIGKILL). After the leader exits, the group is killed anyway, so
// no helper process of the test outlives it.
func execGroup(ctx context.Context, exe, wd string, env []string, stdout, stderr string, timeout time.Duration) (int, bool, error) {
	outF, err := os.OpenFile(stdout, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, false, err
	}
	defer outF.Close()
	errF, err := os.OpenFile(stderr, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, false, err
	}
	defer errF.Close()
	cmd := exec.Command(exe)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = wd, env, outF, errF
	cmd.SysProcAttr = groupAttr()
	if err := cmd.Start(); err != nil {
		return 0, false, err
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var werr error
	timedOut := false
	select {
	case werr = <-done:
	case <-timer.C:
		timedOut = true
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		werr = <-done
	case <-ctx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
		return 0, false, ctx.Err()
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	var ee *exec.ExitError
	switch {
	case werr == nil:
		return 0, timedOut, nil
	case errors.As(werr, &ee):
		return ee.ExitCode(), timedOut, nil
	}
	return 0, timedOut, werr
}

// cleanup deletes every container left in root (through the same
// wrapper), removes the suite's fixed cgroups when the test uses them, and
// detaches any mount left under dir. It returns how many containers it deleted, how many
// mounts it detached, and what it could not clean.
func cleanup(ctx context.Context, rt, root, dir string, fixedCgroup bool) (int, int, []string) {
	var problems []string
	ids, err := containerDirs(root)
	if err != nil {
		problems = append(problems, err.Error())
	}
	for _, id := range ids {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := exec.CommandContext(dctx, rt, "delete", "--force", id).CombinedOutput()
		cancel()
		if err != nil {
			problems = append(problems, fmt.Sprintf("delete --force %s: %v: %s", id, err, tail(string(out), 2)))
		}
	}
	if left, err := containerDirs(root); err == nil && len(left) > 0 {
		problems = append(problems, fmt.Sprintf("containers still in the runtime root: %v", left))
	}
	if fixedCgroup {
		problems = append(problems, removeSuiteCgroups()...)
	}
	mounts, mp := unmountUnder(dir)
	return len(ids), mounts, append(problems, mp...)
}

// containerDirs lists the container state directories in a runtime root
// (runc and crun keep one directory per container id there).
func containerDirs(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// tail returns the last n non-empty lines of s.
func tail(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
