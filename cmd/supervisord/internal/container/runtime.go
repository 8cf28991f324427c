package container

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"hostkit.dev/lib/api/helperapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// Runtime drives container instances through the helper's socket. The
// zero value is not usable; make one with New. Safe for concurrent use
// on different instances; the caller serializes operations on one
// instance (the manager's instance lock).
type Runtime struct {
	socket string
	log    *slog.Logger
}

// New returns a Runtime for the helper's socket (by default
// <run>/helper/api.sock). Nothing is dialled until an operation needs the
// helper; each operation uses a connection of its own.
func New(socket string, log *slog.Logger) *Runtime {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runtime{socket: socket, log: log}
}

// callTimeout bounds a helper call whose context has no deadline (a
// create verifies and unpacks the image: about a second for a small one).
const callTimeout = 60 * time.Second

// client dials nothing yet: the first call does.
func (rt *Runtime) client(timeout time.Duration) *helperapi.Client {
	return helperapi.NewClient(rpc.NewClient(rt.socket, timeout))
}

// unreachable are the codes that mean the helper did not serve the
// request at all: it is not running, refused this peer (its executable is
// not on the allowlist), is shutting down, or the connection broke.
var unreachable = map[string]string{
	wire.CodeUnavailable:        "the containerization-helper is not running or its socket is missing",
	wire.CodePeerDenied:         "the containerization-helper refused supervisord (is supervisord's executable on its allowlist? -allow-exe)",
	wire.CodeServerShuttingDown: "the containerization-helper is shutting down",
	wire.CodeConnectionClosed:   "the connection to the containerization-helper broke",
	wire.CodeRequestDeadline:    "the containerization-helper did not answer in time",
}

// isUnreachable reports whether err means the helper did not serve the
// call (so nothing can be concluded about the container).
func isUnreachable(err error) bool {
	_, ok := unreachable[wire.CodeOf(err)]
	return ok
}

// unavailable turns a helper error of step into supervisord's
// runtime.unavailable, keeping the step and the helper's code in the
// message (the reason), and the helper's retry hint. A container
// request is never run on the host instead.
func unavailable(step string, err error) *wire.Error {
	we := wire.AsError(err)
	msg := step + ": " + we.Code + ": " + we.Msg
	if why, ok := unreachable[we.Code]; ok {
		msg = step + ": " + we.Code + ": " + why + "; the container request was not run (never on the host)"
	}
	retry := we.Retry
	if retry == "" {
		retry = wire.RetryNever
	}
	return &wire.Error{Code: api.CodeRuntimeUnavailable, Msg: msg, Retry: retry, Err: err}
}

// mapErr maps a helper error: a request the helper found invalid (the
// image, the command, the environment) is instance.invalid; anything
// else is runtime.unavailable. Both keep the helper's code in the
// message.
func mapErr(step string, err error) error {
	c := wire.CodeOf(err)
	if strings.HasPrefix(c, "image.") || c == wire.CodeRequestInvalid {
		we := wire.AsError(err)
		return &wire.Error{Code: api.CodeInstanceInvalid, Msg: step + ": " + c + ": " + we.Msg, Retry: wire.RetryNever, Err: err}
	}
	return unavailable(step, err)
}

// negotiate asks the helper for its project and capability digest. A
// failure is runtime.unavailable with the reason (provider.unavailable,
// capability.unavailable, peer.denied, daemon.unavailable ...).
func negotiate(ctx context.Context, c *helperapi.Client) (*helperapi.NegotiateResponse, error) {
	n, err := c.Negotiate(ctx, nil)
	if err != nil {
		return nil, unavailable("runtime.negotiate", err)
	}
	return n, nil
}

// ErrProjectChanged is wrapped by the runtime.unavailable error of an
// instance whose container belongs to another helper project than the
// helper's current one (its state was reset): no helper op can reach
// that container again (errors.Is).
var ErrProjectChanged = errors.New("container: the helper's project changed")

// checkProject refuses to act on a record made with another helper
// project (the helper's state was reset): its container, if any, is
// foreign to the helper now, which never touches it.
func checkProject(rec *Record, n *helperapi.NegotiateResponse) error {
	if rec.ProjectID != "" && rec.ProjectID != n.ProjectID {
		return &wire.Error{Code: api.CodeRuntimeUnavailable, Retry: wire.RetryNever, Err: ErrProjectChanged,
			Msg: "project.mismatch: the containerization-helper's project changed (its state was reset); this instance's container is foreign to it and cannot be reached"}
	}
	return nil
}

// idemKey is a mutation's idempotency key: derived from the instance, the
// record's key generation (gen, random per record; "" in records of older
// versions), the step and the record's plan count, so a replay after a
// crash sends the same key (and body), a new plan a new key, and a new
// record of a reused instance id (destroyed, or a provision undone) keys
// that the helper, which keeps its answers for a day, has never seen. At
// most 64 bytes.
func idemKey(instance, gen, step string, attempt int) string {
	if gen == "" {
		return "sv-" + instance + "-" + step + "-" + strconv.Itoa(attempt)
	}
	return "sv-" + instance + "-" + gen + "-" + step + "-" + strconv.Itoa(attempt)
}

// Readopt raises dir's fence by one (a new supervisord process adopts
// the instance) and saves the record. A missing record is not an error:
// the provision that would have made it never reached the helper.
func Readopt(dir string) error {
	rec, err := LoadRecord(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if rec.Deleted() {
		return nil
	}
	rec.Fence++
	return rec.Save(dir)
}
