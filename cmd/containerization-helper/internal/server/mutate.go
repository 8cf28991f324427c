package server

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"syscall"
	"time"

	"hostkit.dev/cmd/containerization-helper/internal/provider"
	"hostkit.dev/cmd/containerization-helper/internal/state"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// gate is what every mutation passes before the runtime is asked: the
// body decodes, the provider is negotiated, the context matches this
// helper and the current capability snapshot, the id is one the helper
// makes, the container's lock is held, and the plan confirms exactly
// this mutation and its capabilities are in the snapshot. The plan is
// consumed (and the fence raised) only by commit, after the caller's own
// checks.
type gate struct {
	req    *helperapi.MutationRequest
	rt     *active
	plan   *Plan
	unlock func()
}

func (s *Server) open(ctx context.Context, call *rpc.Call, req *helperapi.MutationRequest, kind string) (*gate, error) {
	g := &gate{req: req}
	rt, err := s.runtime(ctx)
	if err != nil {
		return nil, err
	}
	g.rt = rt
	if err := s.checkContext(rt, g.req.Context); err != nil {
		return nil, err
	}
	if !validID(g.req.ContainerID) {
		return nil, wire.Errorf(CodeInvalidID, "container_id is not an id this helper makes")
	}
	if g.unlock, err = s.locks.lock(ctx, g.req.ContainerID); err != nil {
		return nil, err
	}
	if g.plan, err = s.takePlan(call, kind, g.req); err != nil {
		g.unlock()
		return nil, err
	}
	if err := rt.snap.Require(capsFor(kind)...); err != nil {
		g.unlock()
		return nil, err
	}
	if err := s.cfg.Store.CheckFence(g.req.Context.InstanceID, g.req.Context.Fence); err != nil {
		g.unlock()
		return nil, err
	}
	return g, nil
}

// begin raises the instance's fence, consumes the plan and writes rec
// with the in-progress phase, in one store write (state.Batch), while the
// op's audit "before" record is synced (withAuditSync): from here on the
// mutation acts, with both durable, and a crash of the helper from here on
// leaves a record that recovery re-observes.
func (s *Server) begin(ctx context.Context, g *gate, rec *state.Container, phase state.Phase) error {
	rec.Phase = phase
	werr, serr := withAuditSync(ctx, func() error {
		_, err := s.cfg.Store.Apply(state.Batch{
			Fence:       &state.Fence{Instance: g.req.Context.InstanceID, N: g.req.Context.Fence},
			ConsumePlan: g.plan.Hash,
			Put:         rec,
			// The answer's write (durableIdem) syncs the directory: until then
			// only a power loss, which ends the containers too, could bring
			// back the state before this unacknowledged op.
			DeferDirSync: true,
		})
		return err
	})
	if werr != nil {
		return werr
	}
	if serr != nil {
		return wire.Wrap(wire.CodeInternal, "the audit log cannot record this change", serr)
	}
	rec.Updated = s.cfg.Now() // the store's own time is at most this
	return nil
}

// owned reads id's state and checks that its annotations bind it to this
// project and to c's instance, and that c's fence is not older than the
// container's. Errors: container.not_found, container.not_owned,
// fence.stale.
func (s *Server) owned(ctx context.Context, id string, c helperapi.Context) (*provider.State, error) {
	st, err := s.cfg.Runtime.State(ctx, id)
	if err != nil {
		return nil, s.mapErr(ctx, err)
	}
	ann := st.Annotations
	if ann[helperapi.AnnotationProject] != s.cfg.Store.ProjectID() || ann[helperapi.AnnotationInstance] != c.InstanceID {
		return nil, wire.Errorf(helperapi.CodeContainerNotOwned, "the container is not this project's and instance's")
	}
	if f, err := strconv.ParseUint(ann[helperapi.AnnotationFence], 10, 64); err != nil || f > c.Fence {
		return nil, wire.Errorf(CodeFenceStale, "the container was made under a newer fence")
	}
	return st, nil
}

// record returns id's record, or a fresh one for an owned container the
// helper has no record of (an orphan from lost state).
func (s *Server) record(st *provider.State, c helperapi.Context) (*state.Container, error) {
	rec, ok, err := s.cfg.Store.Container(st.ID)
	if err != nil {
		return nil, err
	}
	if !ok {
		f, _ := strconv.ParseUint(st.Annotations[helperapi.AnnotationFence], 10, 64)
		rec = state.Container{ID: st.ID, Instance: c.InstanceID, Fence: f}
		if st.Bundle == s.bundlePath(st.ID) {
			rec.Bundle, rec.ConsoleLog = st.Bundle, s.logPath(st.ID)
		}
	}
	return &rec, nil
}

// setPhase writes rec with phase: an in-progress phase before the step it
// names runs.
func (s *Server) setPhase(rec *state.Container, phase state.Phase) error {
	rec.Phase = phase
	if err := s.cfg.Store.PutContainer(*rec); err != nil {
		return err
	}
	rec.Updated = s.cfg.Now() // the store's own time is at most this
	return nil
}

// settlePhase records the settled phase after the runtime answered. Under
// durableIdem (every mutation) the write is left to it, which makes it
// durable together with the op's idempotency record, before the answer
// leaves; elsewhere it is written now.
func (s *Server) settlePhase(ctx context.Context, rec *state.Container, phase state.Phase) error {
	p, ok := ctx.Value(pendingKey{}).(*pending)
	if !ok {
		return s.setPhase(rec, phase)
	}
	rec.Phase = phase
	c := *rec
	p.put, p.del = &c, ""
	rec.Updated = s.cfg.Now()
	return nil
}

// dropRecord removes id's record after the runtime deleted the container:
// under durableIdem together with the op's idempotency record, elsewhere
// now.
func (s *Server) dropRecord(ctx context.Context, id string) error {
	if p, ok := ctx.Value(pendingKey{}).(*pending); ok {
		p.put, p.del = nil, id
		return nil
	}
	return s.cfg.Store.DeleteContainer(id)
}

// cleanupTimeout bounds the clean-up of a failed create, which runs even
// when the op's context has ended.
const cleanupTimeout = 30 * time.Second

func (s *Server) create(ctx context.Context, call *rpc.Call, req *helperapi.MutationRequest) (*helperapi.Container, error) {
	g, err := s.open(ctx, call, req, helperapi.KindCreate)
	if err != nil {
		return nil, err
	}
	defer g.unlock()
	id, p := g.req.ContainerID, g.plan
	if _, err := s.cfg.Runtime.State(ctx, id); err == nil {
		return nil, wire.Errorf(CodeExists, "a container with this id exists")
	} else if wire.CodeOf(err) != CodeNotFound {
		return nil, s.mapErr(ctx, err)
	}
	rec := &state.Container{ID: id, Instance: p.Context.InstanceID, Fence: p.Context.Fence, PlanHash: p.Hash, Bundle: s.bundlePath(id), ConsoleLog: s.logPath(id)}
	if err := s.begin(ctx, g, rec, state.PhaseCreating); err != nil {
		return nil, err
	}
	ref := helperapi.ImageRef{Layout: p.Layout, ManifestDigest: p.ManifestDigest}
	patch := BundlePatch{Args: p.Command, Env: p.Env, Annotations: annotations(p, s.cfg.Store.ProjectID())}
	// The layout is read as the peer, as its plan read it (image.Reader).
	if err := s.cfg.Images.Unpack(withPeer(ctx, call.Peer), ref, rec.Bundle, patch); err != nil {
		s.undoCreate(ctx, rec, false)
		return nil, err
	}
	if err := s.cfg.Runtime.Create(ctx, provider.CreateSpec{ID: id, Bundle: rec.Bundle, ConsoleLog: rec.ConsoleLog}); err != nil {
		s.undoCreate(ctx, rec, true)
		return nil, s.mapErr(ctx, err)
	}
	st, err := s.cfg.Runtime.State(ctx, id)
	if err != nil {
		return nil, s.mapErr(ctx, err)
	}
	if err := s.settlePhase(ctx, rec, state.PhaseCreated); err != nil {
		return nil, err
	}
	return s.containerOf(st, rec), nil
}

// undoCreate removes what a failed create left: the runtime's container
// (when it got that far), the bundle, the console log and the record.
func (s *Server) undoCreate(ctx context.Context, rec *state.Container, runtime bool) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if runtime {
		if err := s.cfg.Runtime.Delete(cctx, rec.ID, true); err != nil && wire.CodeOf(err) != CodeNotFound {
			s.log.Warn("helper.create_cleanup", slog.String("container_id", rec.ID), slog.String("code", wire.CodeOf(err)))
			return // keep the record and bundle: observe shows the container, delete removes it
		}
	}
	_ = os.RemoveAll(rec.Bundle)
	_ = os.Remove(rec.ConsoleLog)
	if err := s.cfg.Store.DeleteContainer(rec.ID); err != nil {
		s.log.Warn("helper.create_cleanup", slog.String("container_id", rec.ID), slog.String("code", wire.CodeOf(err)))
	}
}

func (s *Server) start(ctx context.Context, call *rpc.Call, req *helperapi.MutationRequest) (*helperapi.Container, error) {
	g, _, rec, err := s.claim(ctx, call, req, helperapi.KindStart, state.PhaseStarting, func(st *provider.State, _ *Plan) error {
		if st.Status != provider.StatusCreated {
			return wire.Errorf(CodeBadState, "only a created container can be started (it is %s)", st.Status)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer g.unlock()
	if err := s.cfg.Runtime.Start(ctx, rec.ID); err != nil {
		return nil, s.mapErr(ctx, err)
	}
	return s.settle(ctx, rec.ID, rec, state.PhaseRunning)
}

// claim is the prologue of start, restart and delete: it opens the gate
// for kind, reads the container's state and checks it is owned by the
// context's project and instance, runs the op's own check on it (with the
// plan), and
// begins the mutation with phase (fence, plan and in-progress record in
// one durable write). The caller releases g.unlock.
func (s *Server) claim(ctx context.Context, call *rpc.Call, req *helperapi.MutationRequest, kind string, phase state.Phase,
	check func(*provider.State, *Plan) error) (*gate, *provider.State, *state.Container, error) {
	g, err := s.open(ctx, call, req, kind)
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := s.owned(ctx, g.req.ContainerID, g.req.Context)
	if err == nil {
		err = check(st, g.plan)
	}
	var rec *state.Container
	if err == nil {
		rec, err = s.record(st, g.req.Context)
	}
	if err == nil {
		err = s.begin(ctx, g, rec, phase)
	}
	if err != nil {
		g.unlock()
		return nil, nil, nil, err
	}
	return g, st, rec, nil
}

// settle re-reads id's state after a step, records phase and answers the
// container.
func (s *Server) settle(ctx context.Context, id string, rec *state.Container, phase state.Phase) (*helperapi.Container, error) {
	st, err := s.cfg.Runtime.State(ctx, id)
	if err != nil {
		return nil, s.mapErr(ctx, err)
	}
	if err := s.settlePhase(ctx, rec, phase); err != nil {
		return nil, err
	}
	return s.containerOf(st, rec), nil
}

func (s *Server) restart(ctx context.Context, call *rpc.Call, req *helperapi.MutationRequest) (*helperapi.Container, error) {
	g, st, rec, err := s.claim(ctx, call, req, helperapi.KindRestart, state.PhaseStopping, func(st *provider.State, _ *Plan) error {
		// Only a container whose bundle the helper made can be made again.
		if st.Bundle != s.bundlePath(st.ID) {
			return wire.Errorf(helperapi.CodeContainerNotOwned, "the container's bundle is not the helper's")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer g.unlock()
	id := rec.ID
	if st.Status == provider.StatusRunning || st.Status == provider.StatusPaused {
		if err := s.stop(ctx, id, stopTimeout(g.plan.StopTimeoutMS)); err != nil {
			return nil, err
		}
	}
	if err := s.cfg.Runtime.Delete(ctx, id, false); err != nil {
		return nil, s.mapErr(ctx, err)
	}
	if err := s.setPhase(rec, state.PhaseCreating); err != nil {
		return nil, err
	}
	if err := s.cfg.Runtime.Create(ctx, provider.CreateSpec{ID: id, Bundle: s.bundlePath(id), ConsoleLog: s.logPath(id)}); err != nil {
		return nil, s.mapErr(ctx, err)
	}
	if err := s.setPhase(rec, state.PhaseStarting); err != nil {
		return nil, err
	}
	if err := s.cfg.Runtime.Start(ctx, id); err != nil {
		return nil, s.mapErr(ctx, err)
	}
	return s.settle(ctx, id, rec, state.PhaseRunning)
}

// stopTimeout is a plan's stop timeout, or the default for 0.
func stopTimeout(ms int64) time.Duration {
	if ms == 0 {
		return helperapi.DefaultStopTimeoutMS * time.Millisecond
	}
	return time.Duration(ms) * time.Millisecond
}

// pollEvery is the longest a stop waits between reads of the container's
// state.
const pollEvery = 50 * time.Millisecond

// stop sends SIGTERM to the container's init, waits up to timeout for it
// to stop, then SIGKILLs every process (through the runtime, which walks
// the cgroup and thaws a paused one) and waits again (at most 10 s). A
// paused container gets the SIGKILL at once: its frozen init could not
// handle a SIGTERM before the timeout anyway. The waits end with ctx
// (op.cancel, the deadline).
func (s *Server) stop(ctx context.Context, id string, timeout time.Duration) error {
	stopped, err := s.waitStopped(ctx, id, syscall.SIGTERM, timeout)
	if err != nil || stopped {
		return err
	}
	if err := s.cfg.Runtime.Kill(ctx, id, syscall.SIGKILL, true); err != nil && wire.CodeOf(err) != CodeBadState {
		return s.mapErr(ctx, err)
	}
	stopped, err = s.waitStopped(ctx, id, 0, 10*time.Second)
	if err == nil && !stopped {
		err = &wire.Error{Code: CodeBadState, Msg: "the container did not stop after SIGKILL", Retry: wire.RetryAfterObserve}
	}
	return err
}

// waitStopped reports whether id stopped within timeout, after sending
// sig (unless 0) to its init (signalInit). While the init runs, the wait
// is on a pidfd of it (the exit is seen the moment it happens); the
// runtime's state decides, and polling it is the fallback (an init that
// cannot be opened). A paused container is not signalled and reports
// false at once (stop goes on to SIGKILL).
func (s *Server) waitStopped(ctx context.Context, id string, sig syscall.Signal, timeout time.Duration) (bool, error) {
	deadline := time.Now().Add(timeout)
	w, st, err := s.openInit(ctx, id)
	if err != nil {
		return false, err
	}
	switch {
	case st.Status == provider.StatusStopped:
		return true, nil
	case st.Status == provider.StatusPaused && sig != 0:
		return false, nil
	}
	if w != nil {
		defer w.close()
	}
	if sig != 0 {
		if err := s.signalInit(ctx, id, w, sig); err != nil {
			return false, err
		}
	}
	if w != nil {
		if _, err := w.wait(ctx, deadline); err != nil {
			return false, wire.Wrap(wire.CodeInternal, "stop ended with the op", context.Cause(ctx))
		}
	}
	return s.pollStopped(ctx, id, deadline)
}

// openInit reads id's state and, while it is running, opens a pidfd of
// its init (pidfd_open(2)). A state read after the pidfd was opened that
// still says running with the same init pid makes the pidfd the init's:
// for a running container the provider has checked that pid's start time
// against the runtime's record (a paused one's pid is the runtime's word
// only, so it gets no pidfd). That read is returned. The pidfd is nil when
// the container is not running, has no init pid, or the init cannot be
// opened or changed meanwhile.
func (s *Server) openInit(ctx context.Context, id string) (*pidWaiter, *provider.State, error) {
	st, err := s.cfg.Runtime.State(ctx, id)
	if err != nil {
		return nil, nil, s.mapErr(ctx, err)
	}
	if st.Status != provider.StatusRunning || st.Pid <= 0 {
		return nil, st, nil
	}
	w, err := openPidWaiter(st.Pid)
	if err != nil {
		return nil, st, nil
	}
	again, err := s.cfg.Runtime.State(ctx, id)
	if err != nil {
		w.close()
		return nil, nil, s.mapErr(ctx, err)
	}
	if again.Status != provider.StatusRunning || again.Pid != st.Pid {
		w.close()
		return nil, again, nil
	}
	return w, again, nil
}

// signalInit sends sig to id's init: through w, the init's pidfd, when
// there is one (pidfd_send_signal(2)), else through the runtime's kill. The
// two do the same thing: `runc kill <id> <sig>` without --all is kill(2)
// of the init's pid (runc's libcontainer Signal; crun's kill likewise),
// and the pidfd does it without a runtime process and with no window for
// the pid to be reused. An init that has already exited is no error.
func (s *Server) signalInit(ctx context.Context, id string, w *pidWaiter, sig syscall.Signal) error {
	if w != nil {
		if err := w.signal(sig); err == nil || errors.Is(err, syscall.ESRCH) {
			return nil
		}
	}
	if err := s.cfg.Runtime.Kill(ctx, id, sig, false); err != nil && wire.CodeOf(err) != CodeBadState {
		return s.mapErr(ctx, err)
	}
	return nil
}

// pollStopped reads id's state until it is stopped or deadline passes.
func (s *Server) pollStopped(ctx context.Context, id string, deadline time.Time) (bool, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	// Most inits exit within milliseconds of their signal: poll at 2 ms
	// first and back off to pollEvery, so a prompt exit is seen promptly
	// and a slow one costs few state reads.
	wait := 2 * time.Millisecond
	for {
		st, err := s.cfg.Runtime.State(ctx, id)
		if err != nil {
			return false, s.mapErr(ctx, err)
		}
		if st.Status == provider.StatusStopped {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, wire.Wrap(wire.CodeInternal, "stop ended with the op", context.Cause(ctx))
		case <-t.C:
			return false, nil
		case <-time.After(wait):
		}
		wait = min(2*wait, pollEvery)
	}
}

func (s *Server) delete(ctx context.Context, call *rpc.Call, req *helperapi.MutationRequest) (*helperapi.DeleteResponse, error) {
	g, st, rec, err := s.claim(ctx, call, req, helperapi.KindDelete, state.PhaseDeleting, func(st *provider.State, p *Plan) error {
		if !p.Force && (st.Status == provider.StatusRunning || st.Status == provider.StatusPaused) {
			return wire.Errorf(CodeBadState, "the container is %s; plan the delete with force", st.Status)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer g.unlock()
	id := rec.ID
	if g.plan.Force && (st.Status == provider.StatusRunning || st.Status == provider.StatusPaused) {
		// A forced delete stops the container as helperapi documents it:
		// SIGTERM, the plan's stop timeout, then SIGKILL (an agent gets
		// its chance to flush and exit; a paused one, frozen, cannot, and
		// gets SIGKILL at once).
		if err := s.stop(ctx, id, stopTimeout(g.plan.StopTimeoutMS)); err != nil {
			return nil, err
		}
	}
	if err := s.cfg.Runtime.Delete(ctx, id, g.plan.Force); err != nil && wire.CodeOf(err) != CodeNotFound {
		return nil, s.mapErr(ctx, err)
	}
	answer := s.deleteAnswer(id) // logtail.go: the console log's tail, read before it goes
	s.removeFiles(id, st.Bundle)
	if err := s.dropRecord(ctx, id); err != nil {
		s.log.Warn("helper.delete_cleanup", slog.String("container_id", id), slog.String("code", wire.CodeOf(err)))
	}
	return answer, nil
}

// forget removes a deleted container's bundle (only when it is the
// helper's own), console log and record.
func (s *Server) forget(id, bundle string) {
	s.removeFiles(id, bundle)
	if err := s.cfg.Store.DeleteContainer(id); err != nil {
		s.log.Warn("helper.delete_cleanup", slog.String("container_id", id), slog.String("code", wire.CodeOf(err)))
	}
}

// removeFiles removes a deleted container's bundle (only when it is the
// helper's own) and console log.
func (s *Server) removeFiles(id, bundle string) {
	if bundle == s.bundlePath(id) {
		if err := os.RemoveAll(bundle); err != nil {
			s.log.Warn("helper.delete_cleanup", slog.String("container_id", id), slog.String("err", err.Error()))
		}
	}
	if err := os.Remove(s.logPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("helper.delete_cleanup", slog.String("container_id", id), slog.String("err", err.Error()))
	}
}
