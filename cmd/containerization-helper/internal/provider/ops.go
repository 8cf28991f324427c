package provider

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"hostkit.dev/cmd/containerization-helper/internal/codec"
	"hostkit.dev/lib/procexec"
	"hostkit.dev/lib/wire"
)

// exists reports whether the runtime has a state directory for id under
// the provider's root (runc: <root>/<id>/state.json, crun:
// <root>/<id>/status). It reads the helper's own directory and runs
// nothing, so it is how a failed `state` is classified.
func (p *cli) exists(id string) (bool, error) {
	_, err := os.Lstat(filepath.Join(p.root, id))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, wire.Wrap(CodeFailed, p.name+": cannot read the root", err)
}

// exitedNonzero reports whether err is a runtime that ran and failed
// (every runtime error exits 1; crun's ps exits 253 or crashes).
func exitedNonzero(err error) bool { return wire.HasCode(err, procexec.CodeExitNonzero) }

// State returns id's state. Where the codec decodes the runtime's own
// record (Features().StoredState: runc 1.1's state.json), State reads it
// and derives the status the way the runtime's `state` does (see
// storedState), running nothing; in every case that path does not cover,
// and for crun, it runs `state <id>`. An id without a state directory is
// CodeNotFound without running anything. Errors: CodeInvalidID,
// CodeNotFound, CodeDecode, CodeFailed, procexec's.
func (p *cli) State(ctx context.Context, id string) (*State, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	c, err := p.negotiated(ctx)
	if err != nil {
		return nil, err
	}
	if st, ok := p.storedState(c, id); ok {
		p.remember(st)
		return &st, nil
	}
	if ok, err := p.exists(id); err != nil {
		return nil, err
	} else if !ok {
		return nil, p.classified(CodeNotFound, verbState, id, "no such container", "", nil)
	}
	return p.execState(ctx, c, id)
}

// execState runs `state <id>` and decodes it strictly.
func (p *cli) execState(ctx context.Context, c codec.Codec, id string) (*State, error) {
	res, msg, err := p.run(ctx, verbState, nil, []string{id})
	if exitedNonzero(err) {
		ok, xerr := p.exists(id)
		switch {
		case xerr != nil:
			return nil, xerr
		case !ok:
			return nil, p.classified(CodeNotFound, verbState, id, "no such container", msg, err)
		}
		return nil, p.failure(verbState, id, msg, err)
	}
	if err != nil {
		return nil, err
	}
	cs, err := c.State(res.Stdout)
	if err != nil {
		return nil, err
	}
	if cs.ID != id {
		return nil, wire.Errorf(CodeDecode, "%s state %s: the runtime answered for another id", p.name, id)
	}
	st := fromCodec(cs)
	p.remember(st)
	return &st, nil
}

// fromCodec converts a decoded state.
func fromCodec(cs codec.State) State {
	return State{ID: cs.ID, Pid: cs.Pid, Status: Status(cs.Status), Bundle: cs.Bundle,
		Created: cs.Created, Annotations: cs.Annotations}
}

// Create runs `create --bundle <bundle> --pid-file <file> <id>` with the
// runtime's stdout and stderr on spec.ConsoleLog (opened here for
// appending and handed over as descriptors 1 and 2; the container
// inherits it). The runtime's own error text, when create fails, lands
// there too. An id whose state directory exists is CodeExists before
// anything runs (so a duplicate create does not write into the existing
// container's console log); a failure is classified by re-reading state.
// Errors: CodeInvalidID, CodeInvalidArgument, CodeExists, CodeFailed,
// procexec's.
func (p *cli) Create(ctx context.Context, spec CreateSpec) error {
	if err := checkID(spec.ID); err != nil {
		return err
	}
	if !cleanAbs(spec.Bundle) || !cleanAbs(spec.ConsoleLog) {
		return wire.Errorf(CodeInvalidArgument, "bundle and console log must be absolute, clean paths")
	}
	if _, err := p.negotiated(ctx); err != nil {
		return err
	}
	if ok, err := p.exists(spec.ID); err != nil || ok {
		if err != nil {
			return err
		}
		return wire.Errorf(CodeExists, "%s create %s: the container exists", p.name, spec.ID)
	}
	console, err := openConsole(spec.ConsoleLog)
	if err != nil {
		return err
	}
	defer console.Close()
	pidFile := p.tempPath(spec.ID + ".pid") // the runtime creates it
	defer os.Remove(pidFile)
	_, msg, err := p.run(ctx, verbCreate, console, []string{"--bundle", spec.Bundle, "--pid-file", pidFile, spec.ID})
	if exitedNonzero(err) {
		if _, serr := p.State(ctx, spec.ID); serr == nil {
			return p.classified(CodeExists, verbCreate, spec.ID, "the container exists", msg, err)
		}
		return p.failure(verbCreate, spec.ID, msg, err)
	}
	if err != nil {
		return err
	}
	if pid, ok := readPidFile(pidFile); ok {
		p.rememberPid(spec.ID, pid)
	}
	return nil
}

// Start runs `start <id>`. Errors: CodeInvalidID, CodeNotFound,
// CodeBadState (not in created), CodeFailed, procexec's.
func (p *cli) Start(ctx context.Context, id string) error {
	return p.mutate(ctx, verbStart, id, []string{id}, func(st *State) string {
		if st.Status != StatusCreated {
			return "the container is " + string(st.Status) + ", not created"
		}
		return ""
	})
}

// Kill runs `kill [--all] <id> <signal>`; sig must be one of SIGHUP,
// SIGINT, SIGQUIT, SIGKILL, SIGUSR1, SIGUSR2, SIGTERM. It returns once the
// signal is sent, not when the container has stopped. Errors:
// CodeInvalidID, CodeInvalidArgument, CodeNotFound, CodeBadState
// (stopped), CodeFailed, procexec's.
func (p *cli) Kill(ctx context.Context, id string, sig syscall.Signal, all bool) error {
	n, ok := signalArg(sig)
	if !ok {
		return wire.Errorf(CodeInvalidArgument, "signal %d is not one the provider sends", int(sig))
	}
	args := []string{id, n}
	if all {
		args = []string{"--all", id, n}
	}
	return p.mutate(ctx, verbKill, id, args, func(st *State) string {
		if st.Status == StatusStopped {
			return "the container is stopped"
		}
		return ""
	})
}

// Delete removes id and then reaps the container's init if this process
// adopted it (see reapInit). An id without a state directory is
// CodeNotFound before anything runs: `delete --force` of a missing id
// succeeds silently in both runc and crun. Where the codec says
// KillBeforeDelete (runc 1.1, whose forced delete sleeps 100 ms), a
// created container, or a running one when force is set, is stopped
// first with `kill <id> 9` and a wait for its init to exit (killFirst),
// then removed with a plain `delete <id>`; anything else (crun, a paused
// container, a kill or wait that does not succeed) runs `delete [--force]
// <id>` as before. Errors: CodeInvalidID, CodeNotFound, CodeBadState
// (running or paused without force), CodeFailed, procexec's.
func (p *cli) Delete(ctx context.Context, id string, force bool) error {
	if err := checkID(id); err != nil {
		return err
	}
	if ok, err := p.exists(id); err != nil || !ok {
		if err != nil {
			return err
		}
		return wire.Errorf(CodeNotFound, "%s delete %s: no such container", p.name, id)
	}
	c, err := p.negotiated(ctx)
	if err != nil {
		return err
	}
	if c.Features().KillBeforeDelete && p.killFirst(ctx, id, force) {
		force = false // stopped now: a plain delete, no 100 ms sleep
	}
	args := []string{id}
	if force {
		args = []string{"--force", id}
	}
	err = p.mutate(ctx, verbDelete, id, args, func(st *State) string {
		if !force && (st.Status == StatusRunning || st.Status == StatusPaused) {
			return "the container is " + string(st.Status)
		}
		return ""
	})
	if err == nil {
		p.reapInit(id)
		p.forgetStored(id)
	}
	return err
}

// killWait bounds killFirst's wait for a killed init to exit.
const killWait = 10 * time.Second

// killFirst stops id for a plain delete: when it is created, or running
// and force is set, it sends SIGKILL to the init (`kill <id> 9`; the
// init leads the container's PID namespace, so every other process of
// the container dies with it) and waits until the init has exited. It
// reports whether id is stopped now; false leaves the decision to
// `delete` (a paused container, a failed state read, kill or wait).
func (p *cli) killFirst(ctx context.Context, id string, force bool) bool {
	st, err := p.State(ctx, id)
	switch {
	case err != nil:
		return false
	case st.Status == StatusStopped:
		return true
	case st.Status == StatusCreated, st.Status == StatusRunning && force:
	default:
		return false
	}
	if err := p.Kill(ctx, id, syscall.SIGKILL, false); err != nil {
		return false
	}
	if !waitExit(ctx, st.Pid, killWait) {
		return false
	}
	after, err := p.State(ctx, id)
	return err == nil && after.Status == StatusStopped
}

// mutate runs a mutating verb on id and classifies a failure by re-reading
// state: no container is CodeNotFound; wrong (non-empty reason) is
// CodeBadState; otherwise CodeFailed.
func (p *cli) mutate(ctx context.Context, v verb, id string, args []string, wrong func(*State) string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if _, err := p.negotiated(ctx); err != nil {
		return err
	}
	_, msg, err := p.run(ctx, v, nil, args)
	if !exitedNonzero(err) {
		return err
	}
	return p.classify(ctx, v, id, msg, err, wrong)
}

// classify re-reads id's state after v failed with cause.
func (p *cli) classify(ctx context.Context, v verb, id, msg string, cause error, wrong func(*State) string) error {
	st, serr := p.State(ctx, id)
	switch {
	case wire.HasCode(serr, CodeNotFound):
		return p.classified(CodeNotFound, v, id, "no such container", msg, cause)
	case serr != nil:
		return p.failure(v, id, msg, cause)
	}
	if why := wrong(st); why != "" {
		return p.classified(CodeBadState, v, id, why, msg, cause)
	}
	return p.failure(v, id, msg, cause)
}

// Ps returns the container's host pids (`ps --format json <id>`). A
// stopped container has none: runc prints null, crun 1.8 crashes, so a
// failed ps of a stopped container is an empty list. Errors:
// CodeInvalidID, CodeNotFound, CodeDecode, CodeFailed, procexec's.
func (p *cli) Ps(ctx context.Context, id string) ([]int, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	c, err := p.negotiated(ctx)
	if err != nil {
		return nil, err
	}
	res, msg, err := p.run(ctx, verbPs, nil, []string{"--format", "json", id})
	if exitedNonzero(err) {
		st, serr := p.State(ctx, id)
		switch {
		case wire.HasCode(serr, CodeNotFound):
			return nil, p.classified(CodeNotFound, verbPs, id, "no such container", msg, err)
		case serr == nil && st.Status == StatusStopped:
			return []int{}, nil
		}
		return nil, p.failure(verbPs, id, msg, err)
	}
	if err != nil {
		return nil, err
	}
	return c.Ps(res.Stdout)
}

// Stats reads one sample. runc: `events --stats <id>` (one object; never
// the endless `events` stream). crun 1.8 has no events verb: the sample
// comes from the cgroup files of the container's init (cgroupStats), after
// `state` says it is running or paused. Errors: CodeInvalidID,
// CodeNotFound, CodeBadState (not running or paused), CodeDecode,
// CodeFailed, procexec's.
func (p *cli) Stats(ctx context.Context, id string) (*Stats, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	c, err := p.negotiated(ctx)
	if err != nil {
		return nil, err
	}
	live := func(st *State) string {
		if st.Status != StatusRunning && st.Status != StatusPaused {
			return "the container is " + string(st.Status)
		}
		return ""
	}
	if !c.Features().Events {
		st, err := p.State(ctx, id)
		if err != nil {
			return nil, err
		}
		if why := live(st); why != "" {
			return nil, wire.Errorf(CodeBadState, "%s stats %s: %s", p.name, id, why)
		}
		return p.cgroupStats(st.Pid)
	}
	res, msg, err := p.run(ctx, verbEvents, nil, []string{"--stats", id})
	if exitedNonzero(err) {
		return nil, p.classify(ctx, verbEvents, id, msg, err, live)
	}
	if err != nil {
		return nil, err
	}
	s, err := c.Events(res.Stdout)
	if err != nil {
		return nil, err
	}
	if s.ID != id {
		return nil, wire.Errorf(CodeDecode, "%s events %s: the runtime answered for another id", p.name, id)
	}
	return &Stats{CPUTotalNS: s.CPUTotalNS, MemoryBytes: s.MemoryBytes, Pids: s.Pids}, nil
}
