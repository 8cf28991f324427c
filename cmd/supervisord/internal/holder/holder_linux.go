//go:build linux

package holder

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/unix"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/proc"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// drainGrace bounds the wait for the output's EOF once the tree is gone,
// and serveGrace the time attached clients get to read the exit frame.
const (
	drainGrace = 2 * time.Second
	serveGrace = 500 * time.Millisecond
)

func run(ctx context.Context, cfg Config, log *slog.Logger) error {
	unix.CloseOnExec(3) // the agent must not inherit the ready pipe
	ready := os.NewFile(3, "ready")
	fail := func(code string, err error) error {
		if ready != nil {
			b, _ := json.Marshal(Ready{Error: err.Error(), Code: code})
			ready.Write(append(b, '\n'))
			ready.Close()
		}
		return err
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(api.CodeInstanceSpawnFailed, err)
	}
	var md store.Metadata
	if err := json.Unmarshal(mustRead(cfg.Dir+"/"+store.FileMetadata), &md); err != nil {
		return fail(api.CodeInstanceSpawnFailed, err)
	}
	env, err := store.ReadEnv(cfg.Dir + "/" + store.FileAgentEnv)
	if err != nil {
		return fail(api.CodeInstanceSpawnFailed, err)
	}
	h := &holder{
		cfg: cfg, spec: md.Spec, log: log,
		leaderDone: make(chan struct{}), treeEmpty: make(chan struct{}),
		outputDone: make(chan struct{}), finished: make(chan struct{}),
	}
	lj, err := newRotator(cfg.Dir+"/"+store.FileLog, int64(max(md.Spec.LogMaxMB, 1))<<20, md.Spec.LogFiles)
	if err != nil {
		return fail(api.CodeInstanceSpawnFailed, err)
	}
	defer lj.Close()
	h.hub = newHub(RingSize, lj)

	sctx, cancelServe := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelServe()
	l, err := sock.Listen(sctx, sock.Config{Path: cfg.Sock, Group: -1})
	if err != nil {
		return fail(api.CodeInstanceSpawnFailed, err)
	}
	srv, err := rpc.NewServer(rpc.Config{
		Daemon: "holder", Logger: log, IdleTimeout: time.Hour,
		Roles: rpc.Roles{"admin": {uint32(os.Geteuid())}},
	}, h.ops()...)
	if err != nil {
		l.Close()
		return fail(api.CodeInstanceSpawnFailed, err)
	}
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, unix.SIGCHLD)
	defer signal.Stop(sigc)
	out, err := h.start(env)
	if err != nil {
		l.Close()
		return fail(api.CodeInstanceSpawnFailed, err)
	}
	go h.drain(out)
	go h.reap(sigc)
	rec := store.HolderRecord{Nonce: cfg.Nonce, PGID: h.pgid, StartedAt: time.Now().UnixMilli()}
	rec.Holder, _ = proc.Identify(os.Getpid())
	rec.Agent, _ = proc.Identify(h.leader)
	rec.Agent.PID = h.leader
	if err := store.WriteJSON(cfg.Dir+"/"+store.FileHolder, rec); err != nil {
		log.Error("holder.record", slog.Any("err", err))
	}
	b, _ := json.Marshal(Ready{Record: rec})
	ready.Write(append(b, '\n'))
	ready.Close()

	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, l) }()
	// A SIGTERM or SIGINT to the holder stops the tree first: a holder
	// never leaves its tree behind on purpose.
	go func() {
		select {
		case <-ctx.Done():
			h.stop(time.Duration(h.spec.StopTimeoutMS) * time.Millisecond)
		case <-h.finished:
		}
	}()
	<-h.treeEmpty
	select {
	case <-h.outputDone:
	case <-time.After(drainGrace):
		log.Warn("holder.drain_timeout")
	}
	h.hub.end()
	h.finish()
	// Attached clients get the exit frame; then the holder ends.
	for end := time.Now().Add(serveGrace); srv.ActiveConns() > 0 && time.Now().Before(end); {
		time.Sleep(2 * time.Millisecond)
	}
	cancelServe()
	select {
	case <-served:
	case <-time.After(2 * time.Second):
	}
	return nil
}

func mustRead(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

// finish writes exit.json and closes finished.
func (h *holder) finish() {
	h.mu.Lock()
	rec := store.ExitRecord{Stopped: h.stopping, Killed: h.killed, ExitedAt: time.Now().UnixMilli()}
	if h.exit != nil {
		rec.Exit = *h.exit
	} else {
		rec.Exit.Unknown = true
	}
	h.mu.Unlock()
	if err := store.WriteJSON(h.cfg.Dir+"/"+store.FileExit, rec); err != nil {
		h.log.Error("holder.exit_record", slog.Any("err", err))
	}
	h.mu.Lock()
	close(h.finished)
	h.mu.Unlock()
}

// drain copies the agent's output into the hub until EOF (EIO from a PTY
// master whose slave side is closed everywhere).
func (h *holder) drain(r *os.File) {
	defer close(h.outputDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			h.hub.write(buf[:n])
		}
		if err != nil {
			if !errors.Is(err, unix.EIO) && !errors.Is(err, os.ErrClosed) && err.Error() != "EOF" {
				h.log.Debug("holder.drain_end", slog.Any("err", err))
			}
			return
		}
	}
}

// reap is the holder's single reaper: on each SIGCHLD (and a slow tick, in
// case one was coalesced away) it collects every exited child with
// wait4(-1, WNOHANG). ECHILD after the leader was reaped means the tree is
// empty, since every orphaned descendant is reparented to us.
func (h *holder) reap(sigc chan os.Signal) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if h.reapAll() {
			close(h.treeEmpty)
			return
		}
		select {
		case <-sigc:
		case <-tick.C:
		}
	}
}

// reapAll reaps every exited child; it reports whether the tree is empty.
func (h *holder) reapAll() bool {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ECHILD):
			h.mu.Lock()
			done := h.exit != nil
			h.mu.Unlock()
			return done
		case err != nil || pid == 0:
			return false
		}
		h.mu.Lock() // held by start until h.leader is set
		if pid == h.leader && h.exit == nil {
			h.exit = exitStatus(ws)
			close(h.leaderDone)
		}
		h.mu.Unlock()
	}
}

func exitStatus(ws unix.WaitStatus) *api.ExitStatus {
	if ws.Signaled() {
		return &api.ExitStatus{Signal: unix.SignalName(ws.Signal())}
	}
	return &api.ExitStatus{Code: int64(ws.ExitStatus())}
}

// ExitCode maps an exit status to a shell-style code (128+signal).
func ExitCode(e *api.ExitStatus) int64 {
	if e == nil {
		return 0
	}
	if e.Signal != "" {
		return 128 + int64(unix.SignalNum(e.Signal))
	}
	return e.Code
}

var errExited = wire.Errorf(api.CodeInstanceExited, "the agent has exited")
