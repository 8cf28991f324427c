//go:build linux

package holder

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/unix"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/netns"
	"hostkit.dev/cmd/supervisord/internal/outstream"
	"hostkit.dev/cmd/supervisord/internal/proc"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// drainGrace bounds the wait for the output's EOF once the tree is gone.
// Then attached clients get up to attachGrace to take the output still
// queued for them and the exit frame (a client that keeps up may be
// megabytes behind when the agent exits, and on a loaded machine reading
// them takes seconds); a client still behind after it is told
// stream.slow_client (holder.attach). It stays well under the 10 s
// supervisord waits for a holder to end after a stop. Other connections
// get serveGrace to finish their calls.
const (
	drainGrace  = 2 * time.Second
	attachGrace = 5 * time.Second
	serveGrace  = 500 * time.Millisecond
)

func run(ctx context.Context, cfg Config, ch *net.UnixConn, log *slog.Logger) error {
	ready := ch // closed once the Ready message is sent
	fail := func(code string, err error) error {
		if ready != nil {
			_ = writeMsg(ready, Ready{Error: err.Error(), Code: code})
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
		cfg: cfg, spec: md.Spec, log: log, env: env, stopCh: make(chan struct{}),
		policy:     newBackoff(md.Spec.MaxRestarts),
		leaderDone: make(chan struct{}), treeEmpty: make(chan struct{}),
		outputDone: make(chan struct{}), finished: make(chan struct{}),
	}
	lj := newRotator(cfg.Dir+"/"+store.FileLog, int64(max(md.Spec.LogMaxMB, 1))<<20, md.Spec.LogFiles)
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
		// supervisord, the holder's one peer, runs as this uid and holds
		// the admin role here as on its own socket.
		Roles: rpc.Roles{api.RoleAdmin: {uint32(os.Geteuid())}},
	}, h.ops()...)
	if err != nil {
		l.Close()
		return fail(api.CodeInstanceSpawnFailed, err)
	}
	bridged, err := h.isolate(sctx)
	if err != nil {
		l.Close()
		return fail(codeOr(err, api.CodeInstanceSpawnFailed), err)
	}
	if h.ns != nil {
		defer h.ns.Close()
	}
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, unix.SIGCHLD)
	defer signal.Stop(sigc)
	if err := h.startRun(sigc); err != nil {
		l.Close()
		cancelServe()
		<-bridged
		return fail(codeOr(err, api.CodeInstanceSpawnFailed), err)
	}
	// Ready first, then holder.json while supervisord saves the same facts
	// in metadata.json; closing the channel tells it holder.json is
	// written, and its answer waits for that.
	rec := h.record()
	if err := writeMsg(ready, Ready{Record: rec}); err != nil {
		// supervisord went away (a crash between spawn and metadata):
		// the intent record and holder.json let it adopt us on restart.
		log.Warn("holder.ready", slog.Any("err", err))
	}
	h.saveRecord(rec)
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
	for {
		h.waitRun()
		d, again := h.nextRestart()
		if !again || !h.sleep(d) {
			break
		}
		if err := h.startRun(sigc); err != nil {
			log.Error("holder.restart_failed", slog.Any("err", err))
			break
		}
		h.writeRecord()
		log.Info("holder.restarted", slog.Int("restarts", h.restartCount()))
	}
	h.hub.end()
	h.finish()
	// Attached clients get their output and the exit frame, other calls
	// their answers; then the holder ends.
	for end := time.Now().Add(attachGrace); h.attaching.Load() > 0 && time.Now().Before(end); {
		time.Sleep(2 * time.Millisecond)
	}
	for end := time.Now().Add(serveGrace); srv.ActiveConns() > 0 && time.Now().Before(end); {
		time.Sleep(2 * time.Millisecond)
	}
	cancelServe()
	select {
	case <-served:
	case <-time.After(2 * time.Second):
	}
	<-bridged
	return nil
}

// codeOr is err's wire code, or code when err has none.
func codeOr(err error, code string) string {
	if c := wire.CodeOf(err); c != "" && c != wire.CodeInternal {
		return c
	}
	return code
}

// isolate, for network isolated, creates the agent's network namespace
// (loopback only) and mount namespace (its own /etc/resolv.conf and
// /etc/hosts), listens on the proxy address inside it and bridges it to
// egressd's proxy socket until ctx ends, and gives it transparent egress
// (h.transparent). The returned channel is closed once the bridge has
// stopped (at once on the host network). Errors: network.unavailable when
// no namespace can be made, network.nftables_unavailable when it cannot
// get its rules.
func (h *holder) isolate(ctx context.Context) (<-chan struct{}, error) {
	done := make(chan struct{})
	if h.spec.Network != api.NetworkIsolated {
		close(done)
		return done, nil
	}
	ns, err := netns.New()
	if err != nil {
		return nil, err
	}
	// The mount namespace, with the instance's /etc/resolv.conf and
	// /etc/hosts, lives on the same thread: every run joins both.
	if err := ns.PrivateEtc(h.cfg.Dir); err != nil {
		ns.Close()
		return nil, err
	}
	pl, err := ns.Listen(netns.ProxyAddress)
	if err != nil {
		ns.Close()
		return nil, err
	}
	egressDone, err := h.transparent(ctx, ns)
	if err != nil {
		pl.Close()
		ns.Close()
		return nil, err
	}
	h.ns = ns
	go func() {
		defer close(done)
		if err := netns.Bridge(ctx, pl, h.spec.ProxySocket, h.log); err != nil {
			h.log.Error("holder.bridge", slog.Any("err", err))
		}
		<-egressDone
	}()
	return done, nil
}

// errStopping refuses a start once a stop has begun.
var errStopping = errors.New("holder: stopping")

// startRun starts one run of the agent (native or tmux backend; inside the
// namespace when isolated) with fresh per-run channels, its output drain
// and its reaper. A stop that has begun refuses it; the run's channels
// are then closed with the previous exit kept.
func (h *holder) startRun(sigc chan os.Signal) error {
	h.mu.Lock()
	prev := h.exit
	h.exit, h.leader, h.pgid, h.tmuxServer, h.afterTree, h.pty = nil, 0, 0, 0, nil, nil
	h.leaderDone, h.treeEmpty, h.outputDone = make(chan struct{}), make(chan struct{}), make(chan struct{})
	te, od := h.treeEmpty, h.outputDone
	h.mu.Unlock()
	start := func() error {
		var out *os.File
		var err error
		if h.spec.SessionBackend == api.BackendTmux {
			out, err = h.startTmux()
		} else {
			out, err = h.start(h.env)
		}
		if err == nil {
			go h.drain(out, od)
		}
		return err
	}
	var err error
	if h.ns != nil {
		err = h.ns.Do(start)
	} else {
		err = start()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.exit = prev
		if h.exit == nil {
			h.exit = &api.ExitStatus{Unknown: true}
		}
		close(h.leaderDone)
		close(h.treeEmpty)
		close(h.outputDone)
		return err
	}
	h.runStart, h.restarting = time.Now(), false
	go h.reap(sigc, te)
	return nil
}

// waitRun waits for the current run's tree to end and its output to
// reach EOF (bounded by drainGrace).
func (h *holder) waitRun() {
	h.mu.Lock()
	te, od := h.treeEmpty, h.outputDone
	h.mu.Unlock()
	<-te
	h.mu.Lock()
	after := h.afterTree
	h.afterTree = nil
	h.mu.Unlock()
	if after != nil {
		after()
	}
	select {
	case <-od:
	case <-time.After(drainGrace):
		h.log.Warn("holder.drain_timeout")
	}
}

// nextRestart decides, once a run's tree is gone, whether restart
// on-failure starts another run, and after which delay.
func (h *holder) nextRestart() (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopping || h.spec.Restart != api.RestartOnFailure || !failed(h.exit) {
		return 0, false
	}
	d, ok := h.policy.next(time.Since(h.runStart))
	if ok {
		h.restarting = true
		h.restarts++
	}
	h.log.Info("holder.restart", slog.Bool("restart", ok), slog.Duration("delay", d), slog.Int("restarts", h.restarts))
	return d, ok
}

// sleep waits d; false when a stop came first.
func (h *holder) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-h.stopCh:
		return false
	}
}

func (h *holder) restartCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.restarts
}

// writeRecord writes holder.json for the current run and returns it.
func (h *holder) writeRecord() store.HolderRecord {
	rec := h.record()
	h.saveRecord(rec)
	return rec
}

// record is holder.json's content for the current run.
func (h *holder) record() store.HolderRecord {
	h.mu.Lock()
	leader, pgid := h.leader, h.pgid
	h.mu.Unlock()
	rec := store.HolderRecord{Nonce: h.cfg.Nonce, PGID: pgid, StartedAt: time.Now().UnixMilli()}
	rec.Holder, _ = proc.Identify(os.Getpid())
	rec.Agent, _ = proc.Identify(leader)
	rec.Agent.PID = leader
	return rec
}

// saveRecord writes holder.json: atomic, not durable, since the record
// only matters while the host (and so the agent) lives
// (docs/supervisord.md, "Durability").
func (h *holder) saveRecord(rec store.HolderRecord) {
	if err := store.WriteJSONAtomic(h.cfg.Dir+"/"+store.FileHolder, rec); err != nil {
		h.log.Error("holder.record", slog.Any("err", err))
	}
}

func mustRead(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

// finish writes exit.json and closes finished.
func (h *holder) finish() {
	h.mu.Lock()
	rec := store.ExitRecord{Stopped: h.stopping, Killed: h.killed, ExitedAt: time.Now().UnixMilli(), Restarts: h.restarts}
	h.restarting = false
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
func (h *holder) drain(r *os.File, done chan struct{}) {
	defer close(done)
	defer r.Close()
	buf := make([]byte, 32<<10)
	read := outputReader(r)
	for {
		n, err := read(buf)
		if n > 0 {
			if h.hub.write(buf[:n]) {
				time.Sleep(outstream.PaceStep) // a client lags: let the relay run (bounded)
			}
		}
		if err != nil {
			if !errors.Is(err, unix.EIO) && !errors.Is(err, os.ErrClosed) && !errors.Is(err, io.EOF) {
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
func (h *holder) reap(sigc chan os.Signal, treeEmpty chan struct{}) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if h.reapAll() {
			close(treeEmpty)
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
