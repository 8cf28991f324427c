package manager

import (
	"os/exec"
	"path/filepath"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/store"
)

// normalizeBackends validates and defaults the session backend, the
// restart policy and the network mode (issue 6 items 3, 9 and 11).
// Errors: instance.invalid; runtime.unavailable for network isolated when
// supervisord is not root (never a silent fallback to the host network)
// and for tmux when no tmux binary is found.
func (m *Manager) normalizeBackends(req *api.ProvisionRequest) error {
	switch req.SessionBackend {
	case "", api.BackendNative:
		req.SessionBackend = api.BackendNative
	case api.BackendTmux:
		if _, err := m.tmuxPath(); err != nil {
			return err
		}
	default:
		return wire.Errorf(api.CodeInstanceInvalid, "session_backend must be native or tmux")
	}
	switch req.Restart {
	case "", api.RestartNever:
		req.Restart = api.RestartNever
		if req.MaxRestarts != 0 {
			return wire.Errorf(api.CodeInstanceInvalid, "max_restarts needs restart on-failure")
		}
	case api.RestartOnFailure:
		if req.MaxRestarts == 0 {
			req.MaxRestarts = api.DefaultMaxRestarts
		}
		if req.MaxRestarts < 1 || req.MaxRestarts > api.MaxMaxRestarts {
			return wire.Errorf(api.CodeInstanceInvalid, "max_restarts must be 1..1000")
		}
	default:
		return wire.Errorf(api.CodeInstanceInvalid, "restart must be never or on-failure")
	}
	if req.Network == nil {
		return nil
	}
	switch req.Network.Mode {
	case "", api.NetworkHost:
		req.Network.Mode = api.NetworkHost
	case api.NetworkIsolated:
		if !m.root {
			return wire.Errorf(api.CodeRuntimeUnavailable, "network isolated needs supervisord to run as root (a network namespace needs CAP_SYS_ADMIN); the instance was not started on the host network")
		}
		if m.cfg.ProxySocket == "" {
			return wire.Errorf(api.CodeRuntimeUnavailable, "network isolated needs egressd's proxy socket (-egress-proxy-socket)")
		}
	default:
		return wire.Errorf(api.CodeInstanceInvalid, "network.mode must be host or isolated")
	}
	return nil
}

// tmuxPath resolves the configured tmux binary. runtime.unavailable when
// there is none.
func (m *Manager) tmuxPath() (string, error) {
	name := m.cfg.Tmux
	if name == "" {
		name = "tmux"
	}
	p, err := exec.LookPath(name)
	if err == nil {
		p, err = filepath.Abs(p)
	}
	if err != nil {
		return "", wire.Wrap(api.CodeRuntimeUnavailable, "session_backend tmux needs tmux, which is not installed (-tmux)", err)
	}
	return p, nil
}

// tmuxSockPath is instance id's tmux server socket (session_backend tmux).
func (m *Manager) tmuxSockPath(id string) string {
	return filepath.Join(m.cfg.HolderDir, api.Hex16(id)+".tmux")
}

// backendSpec fills md's spec and session kind from its normalized
// request: restart policy, tmux binary and socket, egressd's proxy socket
// for network isolated.
func (m *Manager) backendSpec(md *store.Metadata) error {
	r := &md.Request
	md.Spec.Restart, md.Spec.MaxRestarts = r.Restart, int(r.MaxRestarts)
	if md.Spec.Network == api.NetworkIsolated {
		md.Spec.ProxySocket, md.Spec.SyntheticNames = m.cfg.ProxySocket, m.cfg.SyntheticNames
	}
	if r.SessionBackend == api.BackendTmux {
		p, err := m.tmuxPath()
		if err != nil {
			return err
		}
		md.Session, md.Spec.Tmux, md.Spec.TmuxSocket = api.SessionManaged, p, m.tmuxSockPath(md.ID)
	}
	return nil
}
