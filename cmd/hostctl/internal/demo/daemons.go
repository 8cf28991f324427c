package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/rpc"
)

// readyTimeout bounds how long a daemon may take to answer health.
const readyTimeout = 10 * time.Second

// daemonProc is a daemon the demo started as a real process.
type daemonProc struct {
	name    string
	cmd     *exec.Cmd
	errPath string // its stderr (the daemon's JSON log)
	done    chan struct{}
	waitErr error
}

// startDaemon starts bin/<name> -root root args..., in its own session
// (Ctrl-C in the terminal reaches only hostctl, which cleans up in
// order), with stderr in <root>/<name>.stderr. Unless keep, the daemon
// is killed if hostctl dies (Linux).
func startDaemon(binDir, name, root string, keep bool, args ...string) (*daemonProc, error) {
	errPath := filepath.Join(root, name+".stderr")
	f, err := os.OpenFile(errPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := &daemonProc{name: name, errPath: errPath, done: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(binDir, name), append([]string{"-root", root}, args...)...)
	p.cmd.Stderr = f
	p.cmd.SysProcAttr = sysProcAttr(keep)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// exited reports whether the process has ended.
func (p *daemonProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitReady polls health on c until the daemon answers, it exits, or
// readyTimeout passes.
func (p *daemonProc) waitReady(ctx context.Context, c *rpc.Client) (healthapi.Response, error) {
	deadline := time.Now().Add(readyTimeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		h, err := healthapi.Get(cctx, c)
		cancel()
		if err == nil {
			return h, nil
		}
		switch {
		case p.exited():
			return h, fmt.Errorf("%s exited before it was ready (%v)", p.name, p.waitErr)
		case ctx.Err() != nil:
			return h, ctx.Err()
		case time.Now().After(deadline):
			return h, fmt.Errorf("%s did not answer health within %s: %v", p.name, readyTimeout, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM, waits up to grace, then SIGKILL.
func (p *daemonProc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
}

// stderrTail returns the last n lines of the daemon's stderr.
func (p *daemonProc) stderrTail(n int) []string {
	b, err := os.ReadFile(p.errPath)
	if err != nil {
		return nil
	}
	lines := strings.Split(string(bytes.TrimRight(b, "\n")), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// findBinaries returns the directory holding secretd, egressd and
// supervisord: dir when set, else the running executable's directory.
func findBinaries(dir string) (string, error) {
	if dir == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", err
		}
		if exe, err = filepath.EvalSymlinks(exe); err != nil {
			return "", err
		}
		dir = filepath.Dir(exe)
	}
	var missing []string
	for _, n := range []string{"secretd", "egressd", "supervisord"} {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return "", errors.New("no " + strings.Join(missing, ", ") + " in " + dir +
			": build them next to hostctl (go build -o bin/ ./cmd/...) or pass --bin-dir")
	}
	return dir, nil
}
