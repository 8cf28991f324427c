package procexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// Execution tuning.
const (
	// watchInterval is how often the output watcher checks file sizes.
	watchInterval = 5 * time.Millisecond
	// cleanupBudget bounds the wait for a killed group to disappear.
	cleanupBudget = 5 * time.Second
)

// execute runs a prepared spec (Linux).
func (r *Runner) execute(ctx context.Context, p *prepared) (*Result, error) {
	spec := p.spec
	outLimit, errLimit := limit(spec.StdoutLimit), limit(spec.StderrLimit)
	stdout, stderr, err := outputFiles(spec.Stdout == nil, spec.Stderr == nil)
	if err != nil {
		return nil, wire.Wrap(CodeExecFailed, r.text(spec.Purpose)+": cannot create output files", err)
	}
	// The child's descriptors 1 and 2: the runner's unnamed files, or the
	// caller's own (never closed or read here).
	childOut, childErr := stdout, stderr
	if stdout != nil {
		defer stdout.Close()
	} else {
		childOut = spec.Stdout
	}
	if stderr != nil {
		defer stderr.Close()
	} else {
		childErr = spec.Stderr
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, wire.Wrap(CodeExecFailed, r.text(spec.Purpose)+": cannot open "+os.DevNull, err)
	}
	defer devnull.Close()

	dir := spec.Dir
	if dir == nil {
		if dir, err = OpenWorkDir("/"); err != nil {
			return nil, err
		}
		defer dir.Close()
	}
	dirfd, release, err := dir.hold()
	if err != nil {
		return nil, err
	}
	env := append([]string{}, spec.Env...) // non-nil: os/exec adds nothing
	cmd := &exec.Cmd{
		Path:   p.path,
		Args:   append([]string{p.path}, spec.Args...),
		Env:    env,
		Dir:    fmt.Sprintf("/proc/self/fd/%d", dirfd), // resolved in the child: the pinned directory
		Stdin:  devnull,
		Stdout: childOut,
		Stderr: childErr,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: syscall.SIGKILL, // if this thread dies, the leader dies
		},
	}
	if err := markCloexec(); err != nil {
		release()
		return nil, wire.Wrap(CodeExecFailed, r.text(spec.Purpose)+": cannot mark descriptors close-on-exec", err)
	}
	start := time.Now()
	err = cmd.Start()
	release()
	if err != nil {
		return nil, wire.Wrap(CodeExecFailed, r.text(spec.Purpose)+": cannot start "+r.text(p.path), err)
	}
	pid := cmd.Process.Pid
	g := &group{pgid: pid}

	timer := time.AfterFunc(spec.timeout(), func() { g.kill(CodeTimeout) })
	stopCtx := context.AfterFunc(ctx, func() { g.kill(CodeCancelled) })
	exited := make(chan struct{})
	watched := make(chan struct{})
	var seenOut, seenErr int64 // the largest sizes the watcher saw
	go func() {
		defer close(watched)
		seenOut, seenErr = watch(exited, g, stdout, stderr, outLimit, errLimit)
	}()

	waitErr := waitExited(pid) // the leader is a zombie now: its pgid is still reserved
	dur := time.Since(start)
	g.leaderExited() // kills what is left of the group while the pgid is safe to use
	close(exited)
	<-watched
	timer.Stop()
	stopCtx()
	if err := cmd.Wait(); err != nil && waitErr == nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			waitErr = err
		}
	}
	cleanupErr := g.cleanup(cleanupBudget)

	res := &Result{Path: p.path, Pid: pid, ExitCode: -1, Duration: dur}
	if st := cmd.ProcessState; st != nil {
		res.ExitCode = st.ExitCode()
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = unix.SignalName(ws.Signal())
		}
	}
	var readErr error
	res.Stdout, res.StdoutSize, readErr = readBounded(stdout, outLimit)
	var err2 error
	res.Stderr, res.StderrSize, err2 = readBounded(stderr, errLimit)
	readErr = errors.Join(readErr, err2, waitErr)
	res.Summary = r.summary(p, res)

	purpose := r.text(spec.Purpose)
	switch cause := g.reason(); {
	case cleanupErr != nil:
		return res, retry(wire.Wrap(CodeCleanupFailed, purpose+": a process of its group survived the kill", cleanupErr))
	case cause == CodeTimeout:
		return res, retry(wire.Errorf(CodeTimeout, "%s: timed out after %s; process group killed", purpose, spec.timeout()))
	case cause == CodeCancelled:
		return res, retry(wire.Wrap(CodeCancelled, purpose+": cancelled; process group killed", ctx.Err()))
	case cause == CodeOutputOverflow || max(res.StdoutSize, seenOut) > outLimit || max(res.StderrSize, seenErr) > errLimit:
		return res, retry(wire.Errorf(CodeOutputOverflow, "%s: output passed its limit (stdout %d of %d bytes, stderr %d of %d); process group killed",
			purpose, res.StdoutSize, outLimit, res.StderrSize, errLimit))
	case readErr != nil:
		return res, retry(wire.Wrap(CodeExecFailed, purpose+": cannot collect the result", readErr))
	case res.Signal != "":
		return res, retry(wire.Errorf(CodeExitNonzero, "%s: killed by %s: %s", purpose, res.Signal, r.tail(spec, res.Stderr)))
	case res.ExitCode != 0:
		return res, retry(wire.Errorf(CodeExitNonzero, "%s: exit status %d: %s", purpose, res.ExitCode, r.tail(spec, res.Stderr)))
	}
	return res, nil
}

// retry marks an error that happened after the start: the command may have
// had an effect.
func retry(e *wire.Error) *wire.Error {
	e.Retry = wire.RetryAfterObserve
	return e
}

// waitExited blocks until pid has exited without reaping it (waitid(2) with
// WNOWAIT), so its pid and process group id cannot be reused yet.
func waitExited(pid int) error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// watch kills g when either of the runner's output files passes its limit,
// until exited is closed (a nil file, the caller's, is not watched). It
// returns the largest sizes it saw, so a child that overflows and then
// truncates its output is still reported.
func watch(exited <-chan struct{}, g *group, stdout, stderr *os.File, outLimit, errLimit int64) (maxOut, maxErr int64) {
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-exited:
			return maxOut, maxErr
		case <-t.C:
		}
		maxOut, maxErr = max(maxOut, written(stdout)), max(maxErr, written(stderr))
		if maxOut > outLimit || maxErr > errLimit {
			g.kill(CodeOutputOverflow)
			return maxOut, maxErr
		}
	}
}

// readBounded returns at most limit bytes from the start of f and how many
// the child wrote. A nil f (a caller-supplied file) gives nothing.
func readBounded(f *os.File, limit int64) ([]byte, int64, error) {
	if f == nil {
		return nil, 0, nil
	}
	n := written(f)
	buf := make([]byte, min(n, limit))
	m, err := f.ReadAt(buf, 0)
	if err != nil && m != len(buf) {
		return buf[:m], n, err
	}
	return buf, n, nil
}
