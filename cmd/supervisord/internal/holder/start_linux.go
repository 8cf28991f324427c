//go:build linux

package holder

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// lookPath resolves argv0 against the agent's PATH (not the holder's).
func lookPath(argv0 string, env []string) (string, error) {
	if strings.Contains(argv0, "/") {
		return argv0, nil
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, argv0)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("executable not found in the agent's PATH: " + argv0)
}

// start starts the agent in its own session: with a PTY, Setsid+Setctty
// with the child-side Ctty 0 (never Setpgid, which fails with EPERM after
// Setsid), the PTY sized before start; without one, output goes to a pipe.
// No Pdeathsig: it would fire when the starting thread exits. The holder
// keeps h.mu while starting, so the reaper cannot record the leader's exit
// before h.leader is set. It returns the reading end of the output.
func (h *holder) start(env []string) (*os.File, error) {
	env = StripEnv(env)
	argv := h.spec.Command
	path, err := lookPath(argv[0], env)
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Dir: h.spec.WorkingDir}
	attr := &syscall.SysProcAttr{Setsid: true}
	if h.spec.AgentUID >= 0 && os.Geteuid() == 0 {
		attr.Credential = &syscall.Credential{Uid: uint32(h.spec.AgentUID), Gid: uint32(h.spec.AgentUID)}
	}
	var out, closeAfter, master *os.File
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	if h.spec.PTY {
		m, tty, err := pty.Open()
		master = m
		if err != nil {
			return nil, err
		}
		rows, cols := h.spec.Rows, h.spec.Cols
		if err := pty.Setsize(master, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
			master.Close()
			tty.Close()
			return nil, err
		}
		if attr.Credential != nil {
			if err := tty.Chown(h.spec.AgentUID, h.spec.AgentUID); err != nil {
				master.Close()
				tty.Close()
				return nil, err
			}
			tty.Chmod(0o620)
		}
		if master, err = pollable(master); err != nil {
			tty.Close()
			return nil, err
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		attr.Setctty, attr.Ctty = true, 0
		out, closeAfter = master, tty
	} else {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, w, w
		out, closeAfter = r, w
	}
	cmd.SysProcAttr = attr
	h.mu.Lock()
	if h.stopping {
		err = errStopping // a stop began: no new run
	} else {
		err = cmd.Start()
	}
	if err == nil {
		h.leader, h.pgid, h.pty = cmd.Process.Pid, cmd.Process.Pid, master
	}
	h.mu.Unlock()
	closeAfter.Close()
	if err != nil {
		out.Close()
		return nil, err
	}
	cmd.Process.Release() // the reaper waits, never os/exec
	return out, nil
}

// pollable returns f as a non-blocking *os.File served by Go's poller, and
// closes f. creack/pty's Open leaves the master in blocking mode (its
// ioctls go through File.Fd), so each read that finds no output would
// block a thread in the kernel, and with the holder's single P the Go
// scheduler hands the P back and forth on every such read (docs
// /supervisord.md, "Attach"). A pollable master also honours write
// deadlines (input). Its ioctls must then go through SyscallConn (setSize),
// never File.Fd, which would make it blocking again.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	var fd int
	var err error
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	if cerr := rc.Control(func(s uintptr) { fd, err = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// setSize sets the terminal size of a PTY master made by pollable.
func setSize(master *os.File, rows, cols uint16) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) {
		err = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	}); cerr != nil {
		return cerr
	}
	return err
}
