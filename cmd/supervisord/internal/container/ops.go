package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	"hostkit.dev/lib/api/helperapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// Spec is what a container instance runs: the image (layout and manifest
// digest), the command (process.args) and the exact environment
// ("KEY=value", replacing the image's).
type Spec struct {
	Image   helperapi.ImageRef // the local OCI layout and manifest digest
	Command []string           // process.args
	Env     []string           // process.env, "KEY=value", sorted
	Start   bool               // start the container (else it stays created)
}

// openSession dials the helper with timeout, negotiates and checks rec's
// project. The caller closes s.c.RPC().
func (rt *Runtime) openSession(ctx context.Context, dir, id string, rec *Record, timeout time.Duration) (*session, error) {
	c := rt.client(timeout)
	n, err := negotiate(ctx, c)
	if err == nil {
		err = checkProject(rec, n)
	}
	if err != nil {
		c.RPC().Close()
		return nil, err
	}
	return &session{c: c, neg: n, dir: dir, id: id, rec: rec, step: func(step string) {
		rt.log.Info("instance.container_step", "instance", id, "step", step, "container_id", rec.ContainerID, "fence", rec.Fence)
	}}, nil
}

// CodeFenceStale is the helper's code for a plan or mutation whose fence
// is below the instance's recorded one.
const CodeFenceStale = "fence.stale"

// maxFreshFence bounds the fence a fresh record climbs to (fence.stale
// at provision): far above any number of restarts of supervisord.
const maxFreshFence = 1 << 40

// fresh reports whether rec has done nothing at the helper yet.
func fresh(rec *Record) bool {
	return rec.ContainerID == "" && len(rec.Done) == 0 && rec.Pending == nil
}

// helperCode is the helper's own code inside a runtime.unavailable or
// instance.invalid error made by mapErr ("" when there is none).
func helperCode(err error) string {
	var we *wire.Error
	if errors.As(err, &we) && we.Err != nil {
		return wire.CodeOf(we.Err)
	}
	return ""
}

// load reads dir's record, or a new one (fence 1) when there is none.
func load(dir string) (*Record, error) {
	rec, err := LoadRecord(dir)
	if errors.Is(err, os.ErrNotExist) {
		var g [3]byte
		_, _ = rand.Read(g[:])
		return &Record{SchemaVersion: RecordSchema, Fence: 1, KeyGen: hex.EncodeToString(g[:])}, nil
	}
	return rec, err
}

// Provision creates instance id's container (plan create, then
// container.create) and, with spec.Start, starts it (plan start, then
// container.start), recording each step in dir's container.json before
// and after it. It resumes where an earlier call stopped: a pending
// mutation is replayed with its key and body, and steps already done are
// skipped, so a provision retried after a crash gets the same container.
// Errors: runtime.unavailable (the helper cannot be reached or refuses:
// the reason is in the message), instance.invalid (no image, or the
// helper refused the image, command or environment).
func (rt *Runtime) Provision(ctx context.Context, dir, id string, spec Spec) (*Record, error) {
	rec, err := load(dir)
	if err != nil {
		return nil, err
	}
	s, err := rt.openSession(ctx, dir, id, rec, callTimeout)
	if err != nil {
		return rec, err
	}
	defer s.c.RPC().Close()
	if rec.Deleted() {
		return rec, nil // stopped: never created again
	}
	if spec.Image.Layout == "" {
		return rec, wire.Errorf(api.CodeInstanceInvalid, "runtime container needs image {layout, manifest_digest}")
	}
	img := spec.Image
	for {
		err := s.run(ctx, StepCreate, helperapi.PlanRequest{Command: spec.Command, Env: spec.Env, Image: &img})
		if err == nil {
			break
		}
		if !fresh(rec) || helperCode(err) != CodeFenceStale || rec.Fence >= maxFreshFence {
			return rec, err
		}
		// A reused instance id (destroyed, or a provision undone after a
		// crash, once a later supervisord had raised its fence): the
		// helper remembers a higher fence than a new record's 1. Nothing
		// was created under this record, so it starts above that fence:
		// doubled until accepted, which overshoots by less than the
		// helper's own fence and stays within its 65,536 step.
		rec.Fence *= 2
		if err := rec.Save(dir); err != nil {
			return rec, err
		}
	}
	if spec.Start {
		if err := s.run(ctx, StepStart, helperapi.PlanRequest{}); err != nil {
			return rec, err
		}
	}
	return rec, nil
}

// Settle resolves a mutation left pending in dir's record (replay, or
// observe), without starting any new step. runtime.unavailable when the
// helper cannot be reached.
func (rt *Runtime) Settle(ctx context.Context, dir, id string) (*Record, error) {
	rec, err := load(dir)
	if err != nil || rec.Pending == nil {
		return rec, err
	}
	s, err := rt.openSession(ctx, dir, id, rec, callTimeout)
	if err != nil {
		return rec, err
	}
	defer s.c.RPC().Close()
	return rec, s.resolve(ctx)
}

// Status is what the helper shows of an instance's container.
type Status struct {
	// State is api.StateCreated, api.StateRunning or api.StateExited
	// (the container's process ended on its own: the runtime keeps no
	// exit code); "" when Gone or when the container was never created.
	State string
	// Gone: the container was deleted (Record.Deleted), or the helper no
	// longer holds it as this instance's (container.not_found,
	// container.not_owned).
	Gone bool
}

// StatusOf reads instance id's container status with one container.usage
// call; it changes nothing (a pending mutation is left for Settle).
// runtime.unavailable when the helper cannot be reached.
func (rt *Runtime) StatusOf(ctx context.Context, dir, id string) (*Record, Status, error) {
	rec, err := load(dir)
	if err != nil {
		return nil, Status{}, err
	}
	if rec.Deleted() {
		return rec, Status{Gone: true}, nil
	}
	if rec.ContainerID == "" {
		return rec, Status{}, nil
	}
	c := rt.client(callTimeout)
	defer c.RPC().Close()
	u, err := c.Usage(ctx, rec.ContainerID)
	switch code := wire.CodeOf(err); {
	case code == CodeContainerNotFound || code == helperapi.CodeContainerNotOwned:
		return rec, Status{Gone: true}, nil
	case err != nil:
		return rec, Status{}, unavailable("container.usage", err)
	}
	switch u.Status {
	case "creating", "created":
		return rec, Status{State: api.StateCreated}, nil
	case "stopped":
		return rec, Status{State: api.StateExited}, nil
	default: // running, paused
		return rec, Status{State: api.StateRunning}, nil
	}
}

// stopGrace is what a stop waits beyond the stop timeout: the helper's
// SIGKILL wait (10 s) and the delete itself.
const stopGrace = 30 * time.Second

// Stop deletes instance id's container: a forced delete is planned with
// stopTimeoutMS and carried out (the helper stops the container —
// SIGTERM, up to the stop timeout, SIGKILL — and deletes it with its
// console log). The delete's answer carries the console log's last MiB,
// read after the container stopped, and it becomes dir's output.log, so
// what the container wrote while it handled SIGTERM is kept. Before the
// delete the log is also copied there (container.logs), as the fallback
// for an answer without a tail: a helper that predates log_tail, or an
// answer replayed after a crash of supervisord mid-delete once the helper
// restarted too (it keeps no tail in its state store). A container that
// is already gone counts as deleted. It is not bounded by ctx's
// cancellation (a stop always finishes), only by the stop timeout plus a
// grace. Errors: runtime.unavailable.
func (rt *Runtime) Stop(ctx context.Context, dir, id string, stopTimeoutMS int64) (*Record, error) {
	rec, err := load(dir)
	if err != nil {
		return nil, err
	}
	if rec.Deleted() {
		return rec, nil
	}
	timeout := time.Duration(stopTimeoutMS)*time.Millisecond + stopGrace
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	s, err := rt.openSession(ctx, dir, id, rec, timeout)
	if err != nil {
		return rec, err
	}
	defer s.c.RPC().Close()
	if err := s.resolve(ctx); err != nil {
		return rec, err
	}
	if rec.ContainerID == "" && !rec.done(StepCreate) {
		s.done(StepDelete, &answer{}) // never created
		return rec, rec.Save(dir)
	}
	if !rec.Deleted() {
		// The fallback copy, written before the delete so that a crash
		// of supervisord during it still leaves the output; replaced by
		// the answer's tail (session.done). Copied at every attempt: a
		// retried stop keeps the latest output.
		if l, err := s.c.Logs(ctx, &helperapi.LogsRequest{ContainerID: rec.ContainerID, MaxBytes: helperapi.MaxLogBytes}); err == nil {
			if err := keepLog(dir, l.Data); err == nil {
				rec.LogSaved = true
			}
		}
	}
	return rec, s.run(ctx, StepDelete, helperapi.PlanRequest{Force: true, StopTimeoutMS: stopTimeoutMS})
}

// Logs returns the last n bytes (at most helperapi.MaxLogBytes) of
// instance id's container output: the helper's console log while the
// container exists, the copy in dir's output.log once it was deleted.
// runtime.unavailable when the helper cannot be reached.
func (rt *Runtime) Logs(ctx context.Context, dir, id string, n int64) ([]byte, error) {
	n = min(max(n, 1), helperapi.MaxLogBytes)
	rec, err := load(dir)
	if err != nil {
		return nil, err
	}
	if rec.Deleted() || rec.ContainerID == "" {
		return tailFile(filepath.Join(dir, FileLog), n)
	}
	c := rt.client(callTimeout)
	defer c.RPC().Close()
	l, err := c.Logs(ctx, &helperapi.LogsRequest{ContainerID: rec.ContainerID, MaxBytes: n})
	if c := wire.CodeOf(err); c == CodeContainerNotFound || c == helperapi.CodeContainerNotOwned {
		return tailFile(filepath.Join(dir, FileLog), n)
	}
	if err != nil {
		return nil, unavailable("container.logs", err)
	}
	return l.Data, nil
}

// tailFile returns the last n bytes of path (nothing when it is missing).
func tailFile(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(fi.Size()-n, 0)
	b := make([]byte, fi.Size()-off)
	_, err = io.ReadFull(io.NewSectionReader(f, off, int64(len(b))), b)
	return b, err
}
