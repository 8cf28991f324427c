//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// runcPath is Debian's runc.
const runcPath = "/usr/sbin/runc"

// direct runs runc itself, with the helper's flags, on a private root.
type direct struct {
	dir      string          // bundles, pid files, logs
	root     string          // runc --root
	template map[string]any  // a helper-made bundle's config.json
	kills    []time.Duration // each `runc kill` of a cycle (the helper signals through a pidfd instead)
}

// newDirect prepares dir and takes the template config from the bundle of
// the helper's container id (its root.path is the helper's read-only
// cached rootfs, which the direct runs share), which must outlive d.
func newDirect(dir, helperState, id string) (*direct, error) {
	d := &direct{dir: dir, root: filepath.Join(dir, "root")}
	if err := os.MkdirAll(d.root, 0o700); err != nil {
		return nil, err
	}
	bundle := filepath.Join(helperState, "bundles", id)
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &d.template); err != nil {
		return nil, err
	}
	// A helper that unpacks into each bundle (before the rootfs cache)
	// names a relative rootfs: use that bundle's.
	if r, ok := d.template["root"].(map[string]any); ok {
		if p, _ := r["path"].(string); p != "" && !filepath.IsAbs(p) {
			r["path"] = filepath.Join(bundle, p)
		}
	}
	if _, ok := d.template["linux"].(map[string]any); !ok {
		return nil, errors.New("the template config has no linux section")
	}
	return d, nil
}

// runc runs runc with the helper's global flags and verb args; stdio, when
// not nil, is its stdout and stderr.
func (d *direct) runc(stdio *os.File, args ...string) error {
	log := filepath.Join(d.dir, "runc-"+hexID()+".log")
	defer os.Remove(log)
	cmd := exec.Command(runcPath, append([]string{"--root", d.root, "--log", log, "--log-format", "json"}, args...)...)
	cmd.Env = []string{}
	if stdio != nil {
		cmd.Stdout, cmd.Stderr = stdio, stdio
	}
	if err := cmd.Run(); err != nil {
		msg, _ := os.ReadFile(log)
		return fmt.Errorf("runc %s: %v: %s", args[0], err, strings.TrimSpace(string(msg)))
	}
	return nil
}

// cycle writes the bundle (the template with this id's cgroup path), then
// create, start and delete: with force, `delete --force`; without, the
// helper's way (`kill id 15`, wait for the init to exit, `delete id`). It
// returns their time, not the wait for the init to be ready (waitReady)
// between start and delete.
func (d *direct) cycle(ctx context.Context, force, trace bool) (time.Duration, error) {
	t0 := time.Now()
	id := "hkd-" + hexID()
	bundle := filepath.Join(d.dir, id)
	if err := os.Mkdir(bundle, 0o700); err != nil {
		return 0, err
	}
	defer os.RemoveAll(bundle)
	cfg := d.template
	cfg["linux"].(map[string]any)["cgroupsPath"] = "/hostkit/" + id
	b, err := json.Marshal(cfg)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		return 0, err
	}
	logPath := filepath.Join(d.dir, id+".log")
	defer os.Remove(logPath)
	console, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return 0, err
	}
	defer console.Close()
	pidFile := filepath.Join(d.dir, id+".pid")
	defer os.Remove(pidFile)
	if err := d.runc(console, "create", "--bundle", bundle, "--pid-file", pidFile, id); err != nil {
		return 0, err
	}
	pb, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pb)))
	if err != nil {
		return 0, err
	}
	defer reap(pid)
	t1 := time.Now()
	if err := d.runc(nil, "start", id); err != nil {
		return 0, err
	}
	t2 := time.Now()
	if err := waitReady(ctx, pid); err != nil {
		return 0, err
	}
	t3 := time.Now()
	timed := func(err error) (time.Duration, error) {
		t4 := time.Now()
		if trace {
			fmt.Printf("    direct cycle: create %s start %s delete %s\n", ms(t1.Sub(t0)), ms(t2.Sub(t1)), ms(t4.Sub(t3)))
		}
		return t2.Sub(t0) + t4.Sub(t3), err
	}
	if force {
		return timed(d.runc(nil, "delete", "--force", id))
	}
	tk := time.Now()
	if err := d.runc(nil, "kill", id, "15"); err != nil { // SIGTERM, as the helper's stop sends
		return 0, err
	}
	d.kills = append(d.kills, time.Since(tk))
	if err := waitExit(ctx, pid); err != nil {
		return 0, err
	}
	return timed(d.runc(nil, "delete", id))
}

// waitReady waits (at most 5 s) until the container's init, pid, the shell
// of benchCmd, is blocked in rt_sigsuspend(2): its SIGTERM trap is set and
// it waits for its child. Before that a SIGTERM can be lost: the init of
// a PID namespace gets only the signals it has a handler for
// (pid_namespaces(7)), and the shell's handler is not yet, or not always,
// in place while it starts its child. Both arms wait, untimed, so the
// time a stop arrives after start does not decide whether it works.
func waitReady(ctx context.Context, pid int) error {
	path := "/proc/" + strconv.Itoa(pid) + "/syscall"
	for deadline := time.Now().Add(5 * time.Second); ctx.Err() == nil; time.Sleep(100 * time.Microsecond) {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if nr, _, _ := strings.Cut(string(b), " "); nr == strconv.Itoa(unix.SYS_RT_SIGSUSPEND) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the init (pid %d) did not reach its wait within 5 s", pid)
		}
	}
	return ctx.Err()
}

// waitExit waits until pid has exited (a pidfd becomes readable).
func waitExit(ctx context.Context, pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for ctx.Err() == nil {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 100)
		if n > 0 {
			return nil
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
	}
	return ctx.Err()
}

// reap collects pid's exit status if it is this process's child (the init,
// adopted as a subreaper), waiting up to a second.
func reap(pid int) {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if got == pid || err != nil {
			return
		}
	}
}

func hexID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
