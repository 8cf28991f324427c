package manager

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"hostkit.dev/lib/api/helperapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/container"
	"hostkit.dev/cmd/supervisord/internal/fault"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// runtime: container instances (docs/supervisord.md, "runtime: container"):
// the same provision/status/stop/destroy/logs contract as host instances,
// carried out by the containerization-helper through Config.Containers.
// Nothing here starts a process on the host.

// errNoTerminal refuses attach (and a PTY) for a container instance.
func errNoTerminal() error {
	return wire.Errorf(api.CodeInstanceInvalid, "containers run detached; no terminal")
}

// errNoSignal refuses instance.signal for a container instance: the
// helper has no kill op; stop deletes the container (SIGTERM, then
// SIGKILL after the stop timeout).
func errNoSignal() error {
	return wire.Errorf(api.CodeInstanceInvalid, "containers cannot be signalled through supervisord; stop the instance instead")
}

// isContainer reports whether md is a runtime container instance.
func isContainer(md *store.Metadata) bool { return md.Request.Runtime == api.RuntimeContainer }

// normalizeContainer validates a runtime container request and fills its
// defaults. It does not need -host-runtime-enabled (that flag is about
// host processes). Errors: runtime.unavailable (no helper configured),
// instance.invalid_id, instance.invalid for what a container cannot have
// (a terminal, a tmux session, a working directory on the host,
// credentials, a network policy, restart on-failure) or a malformed image
// reference.
func (m *Manager) normalizeContainer(req *api.ProvisionRequest) error {
	if m.cfg.Containers == nil {
		return wire.Errorf(api.CodeRuntimeUnavailable, "no containerization-helper is configured (-helper-socket); the container request was not run (never on the host)")
	}
	if req.InstanceID == "" {
		req.InstanceID = api.NewID()
	}
	id, err := api.CanonicalID(req.InstanceID)
	if err != nil {
		return err
	}
	req.InstanceID = id
	if len(req.Command) == 0 || req.Command[0] == "" {
		return wire.Errorf(api.CodeInstanceInvalid, "command is required")
	}
	for _, a := range req.Command {
		if strings.ContainsRune(a, 0) {
			return wire.Errorf(api.CodeInstanceInvalid, "command arguments must not hold NUL")
		}
	}
	// A missing image is refused once the helper answered (Runtime.Provision):
	// an unreachable helper is runtime.unavailable whatever the request.
	if img := req.Image; img != nil {
		if !filepath.IsAbs(img.Layout) || filepath.Clean(img.Layout) != img.Layout {
			return wire.Errorf(api.CodeInstanceInvalid, "image.layout must be an absolute, clean path")
		}
		if !strings.HasPrefix(img.ManifestDigest, "sha256:") || len(img.ManifestDigest) != len("sha256:")+64 {
			return wire.Errorf(api.CodeInstanceInvalid, "image.manifest_digest must be sha256:<64 hex>")
		}
	}
	switch {
	case req.PTY || req.PTYRows != 0 || req.PTYCols != 0:
		return errNoTerminal()
	case req.SessionBackend != "":
		return wire.Errorf(api.CodeInstanceInvalid, "containers run detached; session_backend is for host instances")
	case req.WorkingDir != "":
		return wire.Errorf(api.CodeInstanceInvalid, "working_dir is a host directory; a container runs in its image's working directory")
	case len(req.Credentials) > 0:
		return wire.Errorf(api.CodeInstanceInvalid, "credentials are not available for containers: egressd's proxy is not reachable from a container's network namespace")
	case req.Network != nil:
		return wire.Errorf(api.CodeInstanceInvalid, "network is not available for containers: a container gets its own network namespace with no interface (network none)")
	case req.Restart != "" && req.Restart != api.RestartNever, req.MaxRestarts != 0:
		return wire.Errorf(api.CodeInstanceInvalid, "restart on-failure is not available for containers")
	}
	req.Restart = api.RestartNever
	switch {
	case req.StopTimeoutMS == 0:
		req.StopTimeoutMS = api.DefaultStopTimeoutMS
	case req.StopTimeoutMS < api.MinStopTimeoutMS || req.StopTimeoutMS > api.MaxStopTimeoutMS:
		return wire.Errorf(api.CodeInstanceInvalid, "stop_timeout_ms must be 1000..300000")
	}
	return nil
}

// containerEnv is a container's exact environment (process.env, replacing
// the image's): PATH, the request's env, then the HOSTKIT_* variables a
// host agent gets (instance id, watch agent, loadout, profile). Sorted.
func containerEnv(id string, req *api.ProvisionRequest) map[string]string {
	env := map[string]string{"PATH": DefaultPath}
	for k, v := range req.Env {
		env[k] = v
	}
	env["HOSTKIT_INSTANCE_ID"] = id
	env["HOSTKIT_WATCH_AGENT"] = api.WatchAgent(id)
	if req.Loadout != "" {
		env["HOSTKIT_LOADOUT"] = req.Loadout
	}
	if req.Profile != "" {
		env["HOSTKIT_PROFILE"] = req.Profile
	}
	return env
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// containerSpec is what the helper runs for md.
func containerSpec(md *store.Metadata) container.Spec {
	r := &md.Request
	s := container.Spec{Command: r.Command, Env: envList(containerEnv(md.ID, r)), Start: r.Start}
	if r.Image != nil {
		s.Image = helperapi.ImageRef{Layout: r.Image.Layout, ManifestDigest: r.Image.ManifestDigest}
	}
	return s
}

// provisionContainer is Provision for runtime container, with the
// instance lock held: the instance directory is made with O_EXCL (an
// existing one answers its status when the request is the same, else
// instance.conflict), agent.env and metadata.json are written durably,
// then the helper creates (and with start, starts) the container. When
// the helper cannot be reached or refuses before anything was created,
// the directory is removed and the error returned (runtime.unavailable,
// instance.invalid); when a later step fails the container is deleted
// again first (all or nothing), or, if that fails too, the instance stays
// exited(unknown) for destroy to clean.
func (m *Manager) provisionContainer(ctx context.Context, dg string, req *api.ProvisionRequest) (*api.Instance, error) {
	id := req.InstanceID
	dir := m.st.Dir(id)
	if err := m.st.Create(id); err != nil {
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		md, lerr := m.st.Load(id)
		if lerr != nil {
			return nil, wire.Wrap(api.CodeInstanceExists, "an instance directory with this id exists but has no readable metadata", lerr)
		}
		if md.RequestDigest != dg {
			return nil, wire.Errorf(api.CodeInstanceConflict, "instance %s exists with a different request", id)
		}
		return m.resumeContainer(ctx, md), nil
	}
	env := containerEnv(id, req)
	b, err := store.EncodeEnv(env)
	if err != nil {
		m.discard(id)
		return nil, wire.Wrap(api.CodeInstanceInvalid, "env keys and values must not hold NUL or newline, keys not '='", err)
	}
	now := time.Now().UnixMilli()
	md := &store.Metadata{ID: id, RequestDigest: dg, Request: *req, State: api.StateCreated, WatchAgent: api.WatchAgent(id),
		CreatedAt: now, UpdatedAt: now, Spec: store.Spec{Command: req.Command, Network: api.NetworkNone, AgentUID: -1,
			StopTimeoutMS: req.StopTimeoutMS, Restart: api.RestartNever},
		Intent: &store.Intent{Op: store.OpProvision, Nonce: newNonce(), CreatedAt: now, Invocation: id}}
	if err := store.WriteFileAtomic(m.st.Path(id, store.FileAgentEnv), b, 0o600); err != nil {
		m.discard(id)
		return nil, err
	}
	if err = m.st.SaveIntent(md); err == nil {
		err = store.SyncAll(m.st.Path(id, store.FileAgentEnv))
	}
	if err != nil {
		m.discard(id)
		return nil, err
	}
	fault.Point(fault.ProvisionIntent)
	rec, err := m.cfg.Containers.Provision(ctx, dir, id, containerSpec(md))
	if err != nil {
		m.failContainer(ctx, md, rec)
		return nil, err
	}
	m.applyContainer(md, rec)
	md.Intent = nil
	if err := m.st.Save(md); err != nil {
		m.cfg.Logger.Error("instance.save", slog.String("instance", id), slog.Any("err", err))
	}
	fault.Point(fault.ProvisionRunning)
	decided(ctx)
	m.cfg.Logger.Info("instance.provision", slog.String("instance", id), slog.String("runtime", api.RuntimeContainer),
		slog.String("state", md.State), slog.String("container_id", rec.ContainerID))
	return m.containerView(md, rec, ""), nil
}

// failContainer undoes a failed container provision: nothing at the
// helper (no container, no mutation in flight) → the directory goes; else
// the container is deleted and then the directory goes; if that fails
// the instance stays, exited(unknown), for destroy.
func (m *Manager) failContainer(ctx context.Context, md *store.Metadata, rec *container.Record) {
	if err := m.undoContainer(ctx, md, rec); err != nil {
		m.cfg.Logger.Warn("instance.container_cleanup", slog.String("instance", md.ID), slog.String("code", wire.CodeOf(err)))
		md.Intent = nil
		m.setExited(md, api.StateExited)
	}
}

// undoContainer deletes md's container, if the helper made one (or a
// mutation is in flight), then removes the instance directory. When the
// delete fails, nothing is removed and the error is returned.
func (m *Manager) undoContainer(ctx context.Context, md *store.Metadata, rec *container.Record) error {
	if rec != nil && (rec.ContainerID != "" || rec.Pending != nil) {
		if _, err := m.cfg.Containers.Stop(ctx, m.st.Dir(md.ID), md.ID, md.Request.StopTimeoutMS); err != nil {
			return err
		}
	}
	m.discard(md.ID)
	return nil
}

// resolveContainerProvision resolves a container instance's provision
// intent (Reconcile, instance lock held): a mutation left pending is
// settled; when the container reached what the request asked for
// (started, or created without start) the provision is finished, else it
// is undone (container deleted, directory removed). A helper that cannot
// be reached leaves the intent, retried by the egress sweep
// (retryUnresolved); destroy works on it meanwhile.
func (m *Manager) resolveContainerProvision(ctx context.Context, md *store.Metadata) {
	if m.cfg.Containers == nil {
		m.markUnresolved(md.ID, true)
		return
	}
	rec, err := m.cfg.Containers.Settle(ctx, m.st.Dir(md.ID), md.ID)
	if err != nil {
		m.cfg.Logger.Warn("instance.intent_unresolved", slog.String("instance", md.ID), slog.String("code", wire.CodeOf(err)))
		m.markUnresolved(md.ID, true)
		return
	}
	if rec != nil && !rec.Deleted() && (rec.Started() || !md.Request.Start && rec.Created()) {
		m.markUnresolved(md.ID, false)
		md.Intent = nil
		m.applyContainer(md, rec)
		_ = m.st.Save(md)
		m.reconcileContainer(ctx, md)
		m.cfg.Logger.Warn("instance.provision_finished", slog.String("instance", md.ID), slog.String("state", md.State))
		return
	}
	if err := m.undoContainer(ctx, md, rec); err != nil {
		m.cfg.Logger.Warn("instance.intent_unresolved", slog.String("instance", md.ID), slog.String("code", wire.CodeOf(err)))
		m.markUnresolved(md.ID, true)
		return
	}
	m.markUnresolved(md.ID, false)
	m.reclaimed(ctx, md.ID, "provision_undone", nil, map[string]any{"op": store.OpProvision, "runtime": api.RuntimeContainer})
}

// markUnresolved adds id to (or, with on false, takes it off) the
// container provisions still to resolve.
func (m *Manager) markUnresolved(id string, on bool) {
	m.rec.mu.Lock()
	defer m.rec.mu.Unlock()
	if m.rec.unresolved == nil {
		m.rec.unresolved = map[string]bool{}
	}
	if on {
		m.rec.unresolved[id] = true
	} else {
		delete(m.rec.unresolved, id)
	}
}

// retryUnresolved tries again to resolve the container provisions the
// helper could not settle at start.
func (m *Manager) retryUnresolved(ctx context.Context) {
	m.rec.mu.Lock()
	ids := make([]string, 0, len(m.rec.unresolved))
	for id := range m.rec.unresolved {
		ids = append(ids, id)
	}
	m.rec.mu.Unlock()
	for _, id := range ids {
		func() {
			unlock := m.lock(id)
			defer unlock()
			md, err := m.st.Load(id)
			if err != nil || md.Intent == nil || md.Intent.Op != store.OpProvision {
				m.markUnresolved(id, false) // resolved meanwhile (a repeated provision, destroy)
				return
			}
			m.resolveContainerProvision(ctx, md)
		}()
	}
}

// setExited records a terminal state (exited with an unknown status, or
// stopped) and saves md.
func (m *Manager) setExited(md *store.Metadata, state string) {
	md.State = state
	if md.Exit == nil {
		md.Exit = &api.ExitStatus{Unknown: true}
	}
	if md.ExitedAt == 0 {
		md.ExitedAt = time.Now().UnixMilli()
	}
	md.UpdatedAt = time.Now().UnixMilli()
	if err := m.st.Save(md); err != nil {
		m.cfg.Logger.Error("instance.save", slog.String("instance", md.ID), slog.Any("err", err))
	}
}

// applyContainer sets md's state from rec after a step.
func (m *Manager) applyContainer(md *store.Metadata, rec *container.Record) {
	if rec.Deleted() || terminal(md.State) {
		return
	}
	if rec.Started() && md.State == api.StateCreated {
		md.State, md.StartedAt = api.StateRunning, time.Now().UnixMilli()
	}
	md.UpdatedAt = time.Now().UnixMilli()
}

// resumeContainer answers a repeated provision of an existing container
// instance: steps an earlier provision left undone (a crash) are carried
// out now, with the same idempotency keys; then its status. A helper that
// cannot be reached leaves the recorded state, with a warning.
func (m *Manager) resumeContainer(ctx context.Context, md *store.Metadata) *api.Instance {
	if !terminal(md.State) {
		rec, err := m.cfg.Containers.Provision(ctx, m.st.Dir(md.ID), md.ID, containerSpec(md))
		if err != nil {
			return m.containerView(md, rec, err.Error())
		}
		m.applyContainer(md, rec)
		if md.Intent != nil && md.Intent.Op == store.OpProvision {
			md.Intent = nil // the repeated provision finished it
			m.markUnresolved(md.ID, false)
		}
		_ = m.st.Save(md)
	}
	m.reconcileContainer(ctx, md)
	return m.containerStatus(ctx, md)
}

// readopt raises a container instance's fence (container.Readopt): called
// once per instance when supervisord starts and reconciles.
func (m *Manager) readopt(md *store.Metadata) {
	if !isContainer(md) || terminal(md.State) {
		return
	}
	if err := container.Readopt(m.st.Dir(md.ID)); err != nil {
		m.cfg.Logger.Warn("instance.readopt", slog.String("instance", md.ID), slog.Any("err", err))
	}
}

// reconcileContainer is reconcile for a container instance (instance
// lock held): a mutation left pending is resolved, then the helper's view
// of the container is recorded: a container that stopped on its own, or
// is gone, makes the instance exited (status unknown: the runtime keeps
// no exit code). A helper that cannot be reached changes nothing.
func (m *Manager) reconcileContainer(ctx context.Context, md *store.Metadata) {
	if m.cfg.Containers == nil {
		return
	}
	dir := m.st.Dir(md.ID)
	if _, err := m.cfg.Containers.Settle(ctx, dir, md.ID); err != nil {
		return
	}
	rec, st, err := m.cfg.Containers.StatusOf(ctx, dir, md.ID)
	if err != nil || rec == nil {
		return
	}
	switch {
	case st.Gone || st.State == api.StateExited:
		m.setExited(md, api.StateExited)
	case st.State == api.StateRunning && md.State == api.StateCreated:
		m.applyContainer(md, rec)
		_ = m.st.Save(md)
	}
}

// containerStatus is status for a container instance, without any lock:
// the recorded state, refreshed by one container.usage call.
func (m *Manager) containerStatus(ctx context.Context, md *store.Metadata) *api.Instance {
	dir := m.st.Dir(md.ID)
	if terminal(md.State) || m.cfg.Containers == nil {
		rec, _ := container.LoadRecord(dir)
		return m.containerView(md, rec, "")
	}
	rec, st, err := m.cfg.Containers.StatusOf(ctx, dir, md.ID)
	if err != nil {
		return m.containerView(md, rec, err.Error())
	}
	view := m.containerView(md, rec, "")
	switch {
	case st.Gone || st.State == api.StateExited:
		view.State, view.Exit = api.StateExited, &api.ExitStatus{Unknown: true}
	case st.State != "":
		view.State = st.State
	}
	return view
}

// containerView renders a container instance: the host view's fields,
// with the container's id, image and init pid, network none, no agent uid
// (the container runs as its image's user, in its own namespaces) and
// warn (e.g. the helper is unreachable) as the warning.
func (m *Manager) containerView(md *store.Metadata, rec *container.Record, warn string) *api.Instance {
	in := m.view(md, nil)
	in.AgentUID, in.Isolated, in.Warning, in.PGID, in.PID = 0, false, "", 0, 0
	in.Session, in.SessionBackend, in.WorkingDir = "", "", ""
	if img := md.Request.Image; img != nil {
		in.Image = &api.ImageRef{Layout: img.Layout, ManifestDigest: img.ManifestDigest}
	}
	if rec != nil {
		in.ContainerID = rec.ContainerID
		if !terminal(in.State) {
			in.PID = rec.PID
		}
	}
	if warn != "" {
		in.Warning = "containerization-helper: " + warn + " (state as last recorded)"
	}
	return in
}

// stopContainer is Stop for a container instance (instance lock held):
// the helper deletes the container (SIGTERM, the stop timeout, SIGKILL);
// the instance remains, stopped (or exited, when it had ended on its
// own). runtime.unavailable when the helper cannot be reached.
func (m *Manager) stopContainer(ctx context.Context, md *store.Metadata) (*api.Instance, error) {
	if m.cfg.Containers == nil {
		return nil, wire.Errorf(api.CodeRuntimeUnavailable, "no containerization-helper is configured (-helper-socket)")
	}
	if err := m.beginIntent(store.OpStop, md); err != nil {
		return nil, err
	}
	fault.Point(fault.StopIntent)
	rec, err := m.cfg.Containers.Stop(ctx, m.st.Dir(md.ID), md.ID, md.Request.StopTimeoutMS)
	if err != nil {
		// Nothing known to have changed (a mutation in flight is in
		// container.json, settled later): the stop failed, no intent.
		md.Intent = nil
		_ = m.st.Save(md)
		return nil, err
	}
	fault.Point(fault.StopStopped)
	state := api.StateStopped
	if md.State == api.StateExited {
		state = api.StateExited
	}
	md.Intent = nil
	m.setExited(md, state)
	m.cfg.Logger.Info("instance.stop", slog.String("instance", md.ID), slog.String("runtime", api.RuntimeContainer), slog.String("state", md.State))
	return m.containerView(md, rec, ""), nil
}

// destroyContainer is Destroy for a container instance (instance lock
// held): the container is deleted if still present, then the instance
// directory is removed. The directory stays when the delete fails
// (runtime.unavailable), so nothing is orphaned unrecorded; a container
// that the helper's (reset) project no longer owns cannot be reached and
// does not block destroy.
func (m *Manager) destroyContainer(ctx context.Context, md *store.Metadata) error {
	if m.cfg.Containers == nil {
		return wire.Errorf(api.CodeRuntimeUnavailable, "no containerization-helper is configured (-helper-socket); the container cannot be deleted, the instance stays")
	}
	if err := m.beginIntent(store.OpDestroy, md); err != nil {
		return err
	}
	fault.Point(fault.DestroyIntent)
	if _, err := m.cfg.Containers.Stop(ctx, m.st.Dir(md.ID), md.ID, md.Request.StopTimeoutMS); err != nil {
		if !errors.Is(err, container.ErrProjectChanged) {
			md.Intent = nil // the destroy failed; the instance stays as it was
			_ = m.st.Save(md)
			return err
		}
		m.cfg.Logger.Warn("instance.container_foreign", slog.String("instance", md.ID))
	}
	fault.Point(fault.DestroyReleased)
	m.markUnresolved(md.ID, false)
	if err := m.removeDir(md.ID); err != nil {
		return err
	}
	m.cfg.Logger.Info("instance.destroy", slog.String("instance", md.ID), slog.String("runtime", api.RuntimeContainer))
	return nil
}

// containerLogs is Logs for a container instance: the tail of the
// container's console log (at most 1 MiB, the helper's cap), or of the
// copy stop kept. Follow is refused (instance.invalid): poll instead.
func (m *Manager) containerLogs(ctx context.Context, md *store.Metadata, req *api.LogsRequest) (*api.LogsResponse, error) {
	if req.Follow {
		return nil, wire.Errorf(api.CodeInstanceInvalid, "logs follow is not available for containers; read the tail again instead")
	}
	if m.cfg.Containers == nil {
		b, _, err := tail(m.st.Path(md.ID, container.FileLog), tailBytes(req))
		return &api.LogsResponse{Data: b}, err
	}
	b, err := m.cfg.Containers.Logs(ctx, m.st.Dir(md.ID), md.ID, tailBytes(req))
	if err != nil {
		return nil, err
	}
	return &api.LogsResponse{Data: b}, nil
}
