// Package manager is supervisord's instance manager: it provisions host
// instances (one holder process each), reconciles instance directories at
// start, and answers status, list, stop, destroy, signal, logs and attach.
package manager

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/container"
	"hostkit.dev/cmd/supervisord/internal/egress"
	"hostkit.dev/cmd/supervisord/internal/netns"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// Config is the manager's configuration.
type Config struct {
	HostRuntimeEnabled bool           // -host-runtime-enabled
	StateDir           string         // <state>/supervisord; instances live in StateDir/instances
	HolderDir          string         // <run>/supervisord/h: holder sockets
	Exe                string         // this binary, re-executed as `supervisord holder`
	DefaultWorkingDir  string         // used when a request names none
	UIDMin, UIDMax     int            // agent uid range (inclusive), used when root
	LogMaxMB           int            // output log size cap per file, MiB (min 1)
	LogFiles           int            // output log files kept, the current one included (min 1)
	ProxySocket        string         // egressd's proxy.sock, bridged into network isolated namespaces
	SyntheticNames     int            // -synthetic-names: names an isolated instance's resolver answers for (0: the default)
	DefaultNetwork     string         // -default-network: the mode of a host instance whose request names none; "" = api.DefaultNetwork
	Tmux               string         // the tmux binary (session_backend tmux); "" = tmux in PATH
	Logger             *slog.Logger   // the daemon's redacting logger
	Egress             *egress.Client // stages leases and registers bundles; nil: credentialed provisioning fails closed
	HolderPool         int            // holders kept started and idle (0: each provision starts its own); at most MaxHolderPool

	// Containers runs runtime container instances through the
	// containerization-helper (container.go); nil: they fail with
	// runtime.unavailable.
	Containers *container.Runtime

	// Audit records what supervisord releases on its own (reconcile's
	// reclaimed directories, the owner sweep's leases and bundles) and
	// the isolated instances' DNS refusals; nil: not recorded.
	Audit Auditor

	// ProbeNftables tells whether isolated instances can get their
	// transparent egress rules (netns.ProbeNftables); New calls it once
	// and Health reports the result. nil: not probed ("unknown").
	ProbeNftables func() error
}

// Manager owns every instance directory.
type Manager struct {
	cfg     Config
	st      store.Store
	root    bool // supervisord runs as root: agents get their own uid
	mu      sync.Mutex
	locks   map[string]*sync.Mutex
	uidMu   sync.Mutex
	uids    map[string]int // instance → agent uid, guarded by uidMu
	streams sync.Map       // call id → holder stream opened by the attach handler
	rr      reregState     // re-registrations after egressd forgot the bundles (reregister.go)
	pool    *holderPool    // filled by RunPool
	h       holders        // the holder processes (procHolders, from pool)
	rec     recovery       // intents and sweeps left for later (intent.go)
	nsErr   error          // why no namespace could be made at start (root only); nil: network isolated works
	nft     map[string]any // Health's nftables fields, set once by New

	uidsLoaded bool // the instances on disk were read into uids; guarded by uidMu
}

// New returns a manager; it creates the instances directory.
func New(cfg Config) (*Manager, error) {
	if cfg.LogMaxMB < 1 {
		cfg.LogMaxMB = 1
	}
	if cfg.LogFiles < 1 {
		cfg.LogFiles = 1
	}
	m := &Manager{cfg: cfg, st: store.Store{Root: filepath.Join(cfg.StateDir, "instances")}, root: os.Geteuid() == 0, locks: map[string]*sync.Mutex{}, uids: map[string]int{},
		pool: newHolderPool(cfg.Exe, cfg.HolderDir, cfg.HolderPool, cfg.Logger), rr: reregState{kick: make(chan struct{}, 1)}}
	m.h = procHolders{pool: m.pool, sock: m.sockPath}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, err
	}
	if err := m.st.Init(); err != nil {
		return nil, err
	}
	if m.root {
		// Found out once, so that a request that cannot be isolated fails
		// before anything is staged or written, and health can say so.
		m.nsErr = netns.Probe()
	}
	m.nft = nftHealth(cfg.ProbeNftables)
	if code, ok := m.nft["nftables_code"].(string); ok {
		cfg.Logger.Warn("supervisord.nftables", slog.String("code", code), slog.Any("nftables_error", m.nft["nftables_error"]))
	}
	return m, nil
}

// nftHealth runs probe (when set) and returns Health's fields for it:
// "nftables" is "available", "unavailable" (network.nftables_unavailable:
// isolated instances fail to start) or "unknown" (not probed, or no
// namespace could be made to probe in); "nftables_code" and
// "nftables_error" say why when not available.
func nftHealth(probe func() error) map[string]any {
	if probe == nil {
		return map[string]any{"nftables": "unknown"}
	}
	err := probe()
	switch {
	case err == nil:
		return map[string]any{"nftables": "available"}
	case wire.HasCode(err, api.CodeNetworkNftUnavailable):
		return map[string]any{"nftables": "unavailable", "nftables_code": api.CodeNetworkNftUnavailable, "nftables_error": err.Error()}
	}
	return map[string]any{"nftables": "unknown", "nftables_code": wire.CodeOf(err), "nftables_error": err.Error()}
}

// RunPool keeps Config.HolderPool holders started and idle until ctx ends,
// then ends them (docs/supervisord.md, "Holder pool"); provisions take
// from the pool and start their own holder when it is empty or not running.
func (m *Manager) RunPool(ctx context.Context) { m.pool.run(ctx) }

// Isolated reports whether agents run under their own uid.
func (m *Manager) Isolated() bool { return m.root }

// NetworkIsolation reports whether network isolated can be had: supervisord
// is root, a namespace could be made at start and egressd's proxy socket
// is configured.
func (m *Manager) NetworkIsolation() bool {
	return m.root && m.nsErr == nil && m.cfg.ProxySocket != ""
}

// Warning is the "agents are not isolated" warning, or "".
func (m *Manager) Warning() string {
	if m.root {
		return ""
	}
	return api.NotIsolatedWarning
}

// lock returns instance id's operation lock, locked.
func (m *Manager) lock(id string) func() {
	m.mu.Lock()
	l, ok := m.locks[id]
	if !ok {
		l = &sync.Mutex{}
		m.locks[id] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// tryLock is lock without waiting; ok false when an operation holds it.
func (m *Manager) tryLock(id string) (unlock func(), ok bool) {
	m.mu.Lock()
	l, found := m.locks[id]
	if !found {
		l = &sync.Mutex{}
		m.locks[id] = l
	}
	m.mu.Unlock()
	if !l.TryLock() {
		return nil, false
	}
	return l.Unlock, true
}

// sockPath is instance id's holder socket.
func (m *Manager) sockPath(id string) string {
	return filepath.Join(m.cfg.HolderDir, api.Hex16(id)+".sock")
}

// Health returns supervisord's health fields.
func (m *Manager) Health() map[string]any {
	counts := map[string]int64{}
	ids, _ := m.st.IDs()
	for _, id := range ids {
		if md, err := m.st.Load(id); err == nil {
			counts[m.liveState(md, md.State)]++
		}
	}
	h := map[string]any{
		"host_runtime_enabled": m.cfg.HostRuntimeEnabled,
		"agents_isolated":      m.root,
		"instances":            counts,
		"default_network":      m.defaultNetwork(),
		"network_isolation":    m.NetworkIsolation(),
	}
	w := m.Warning()
	if !m.NetworkIsolation() && m.defaultNetwork() == api.NetworkIsolated {
		w = strings.TrimPrefix(w+"; NETWORK ISOLATION UNAVAILABLE: instances that name no network fail with network.unavailable", "; ")
	}
	if w != "" {
		h["warning"] = w
	}
	maps.Copy(h, m.nft)
	return h
}
