package manager

import (
	"os/exec"
	"path/filepath"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/store"
)

// normalizeBackends validates and defaults the session backend, the
// restart policy and the network mode (docs/supervisord.md, "Session
// backends, isolated network, restart").
// Errors: instance.invalid; network.unavailable when the request's
// network mode (named, or the default) is isolated and no namespace can be
// made (never a silent fallback to the host network); runtime.unavailable
// for tmux when no tmux binary is found.
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
	if req.Network != nil && req.Network.Mode != "" && req.Network.Mode != api.NetworkHost && req.Network.Mode != api.NetworkIsolated {
		return wire.Errorf(api.CodeInstanceInvalid, "network.mode must be isolated or host (or absent: supervisord's -default-network)")
	}
	if m.networkMode(req) == api.NetworkIsolated {
		return m.isolationAvailable(req)
	}
	return nil
}

// networkMode is the network mode req runs in: the one it names, else
// supervisord's -default-network. The request itself is left as sent
// (its digest, hence provision's idempotence, does not depend on the
// flag); the resolved mode is recorded in the instance's spec.
func (m *Manager) networkMode(req *api.ProvisionRequest) string {
	if req.Network != nil && req.Network.Mode != "" {
		return req.Network.Mode
	}
	return m.defaultNetwork()
}

// defaultNetwork is Config.DefaultNetwork, or api.DefaultNetwork.
func (m *Manager) defaultNetwork() string {
	if m.cfg.DefaultNetwork == "" {
		return api.DefaultNetwork
	}
	return m.cfg.DefaultNetwork
}

// isolationAvailable fails with network.unavailable when network
// isolated cannot be had here: never a silent fallback to the host
// network. The message says whether the request asked for isolated or
// got it as the default, and how to ask for host explicitly.
func (m *Manager) isolationAvailable(req *api.ProvisionRequest) error {
	why := ""
	switch {
	case !m.root:
		why = "supervisord is not root (a network namespace needs CAP_SYS_ADMIN)"
	case m.nsErr != nil:
		why = "supervisord could not make a network and mount namespace at start (" + m.nsErr.Error() + ")"
	case m.cfg.ProxySocket == "":
		why = "egressd's proxy socket is not configured (-egress-proxy-socket)"
	default:
		return nil
	}
	asked := "asked for"
	if req.Network == nil || req.Network.Mode == "" {
		asked = "got as supervisord's -default-network"
	}
	return wire.Errorf(api.CodeNetworkUnavailable, "network isolated (%s) is unavailable: %s; nothing was started. Ask for network host explicitly to run the agent on the host network", asked, why)
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
