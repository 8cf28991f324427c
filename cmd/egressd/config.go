package main

import (
	"crypto/x509"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"hostkit.dev/cmd/egressd/internal/loopowner"
	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/daemon"
)

// flags are egressd's own flags (besides the common ones and roles).
type flags struct {
	proxyAddress  string
	secretdSocket string
	caFile        string
	agentUIDs     string
	auditFsync    string
	resolve       daemon.StringList
	strip         daemon.StringList
	maxBody       int
	maxResponse   int
	budget        int
	dial          time.Duration
	tlsHandshake  time.Duration
	respHeader    time.Duration
	exchangeIdle  time.Duration
	total         time.Duration
	oldTimeout    bool // -request-timeout was given (renamed -total-timeout)
	anonymous     daemon.StringList
	maxTunnels    int
	authAudit     float64
	invTunnels    int
	invRequests   int
	invStreams    int
	maxConns      int
	maxHeader     int
	handshake     time.Duration
	idle          time.Duration
	grace         time.Duration
}

func (f *flags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.proxyAddress, "proxy-address", "127.0.0.1:4750", "proxy face TCP listener IP:PORT (port 0 picks one); a non-loopback address only when set here; never dialled")
	fs.StringVar(&f.secretdSocket, "secretd-socket", "", "secretd's API socket (default <run>/secretd/api.sock)")
	fs.StringVar(&f.caFile, "ca-file", "", "PEM file of extra CAs trusted for upstream TLS, besides the system roots")
	fs.StringVar(&f.agentUIDs, "agent-uids", "61184-65519", "agent UID range FIRST-LAST: loopback listeners they own get no credential")
	fs.StringVar(&f.auditFsync, "audit-fsync", "always", "audit log fsync policy: always or never")
	fs.Var(&f.resolve, "resolve", "static host map entry HOST:PORT:ADDR (repeatable, as curl --resolve); the only way to reach a non-public address by name")
	fs.Var(&f.strip, "strip-response-header", "response header to remove (repeatable; default "+strings.Join(pipeline.DefaultStripResponse, ",")+")")
	fs.IntVar(&f.maxBody, "max-request-body", 32<<20, "largest request body egressd reads whole before it sends the request, bytes")
	fs.IntVar(&f.maxResponse, "max-response-body", 0, "largest response body, decoded bytes (0: no cap; a streamed answer past it is cut off)")
	fs.IntVar(&f.budget, "buffer-budget", 256<<20, "bytes of request bodies all requests together may hold in memory at once; past it a request is refused with 503 server.busy")
	fs.DurationVar(&f.dial, "dial-timeout", 10*time.Second, "longest a TCP connect to an upstream may take")
	fs.DurationVar(&f.tlsHandshake, "tls-handshake-timeout", 10*time.Second, "longest a TLS handshake with an upstream may take")
	fs.DurationVar(&f.respHeader, "response-header-timeout", 10*time.Minute, "longest an upstream may take to send its response header once the request is sent (a model may think for minutes)")
	fs.DurationVar(&f.exchangeIdle, "idle-timeout", 5*time.Minute, "longest no byte may move in either direction in an exchange: the client sending its body or reading the answer, the upstream sending the answer after its header")
	fs.DurationVar(&f.total, "total-timeout", 0, "longest a whole exchange may take, from the request to the end of the answer (0: no limit)")
	fs.Func("request-timeout", "deprecated name of -total-timeout (accepted with a warning for one release)", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		f.total, f.oldTimeout = d, true
		return nil
	})
	fs.Var(&f.anonymous, "proxy-anonymous-allow", "origin or origin pattern that proxy clients without a token may reach (repeatable; none = anonymous use refused); never with credentials")
	fs.IntVar(&f.maxTunnels, "proxy-max-tunnels", 512, "most concurrent CONNECT tunnels")
	fs.IntVar(&f.maxHeader, "proxy-max-header-bytes", 64<<10, "largest request line and header block on the proxy face, bytes")
	fs.DurationVar(&f.handshake, "proxy-handshake-timeout", 10*time.Second, "longest a proxy client may take to send its first request header or finish a TLS handshake")
	fs.DurationVar(&f.idle, "proxy-idle-timeout", 120*time.Second, "longest a proxy connection or tunnel may sit idle")
	fs.IntVar(&f.invTunnels, "proxy-max-tunnels-per-invocation", 0, "most concurrent CONNECT tunnels of one invocation (0: a quarter of -proxy-max-tunnels)")
	fs.IntVar(&f.invRequests, "proxy-max-requests-per-invocation", 64, "most requests of one invocation in the pipeline at once, from the request body to the answer's header (each may hold a request body)")
	fs.IntVar(&f.invStreams, "proxy-max-streams-per-invocation", 0, "most answers (and WebSocket connections) one invocation streams at once (0: a quarter of -proxy-max-conns)")
	fs.IntVar(&f.maxConns, "proxy-max-conns", 4096, "most open proxy client connections (TCP and Unix socket together)")
	fs.DurationVar(&f.grace, "reregister-grace", 10*time.Second, "after start, how long a proxy request naming an invocation without a bundle gets 503 egress.unavailable with Retry-After: 1 instead of 407, while stagers re-register the bundles a restart lost (0: none)")
	fs.Float64Var(&f.authAudit, "proxy-auth-audit-rate", 20, "failed proxy authentications audited per second after a burst of five times this (the rest are counted in the next record)")
}

// Config is egressd's validated configuration.
type Config struct {
	ProxyAddress  netip.AddrPort     // -proxy-address: the proxy face's TCP listener (port 0 picks one)
	ProxySocket   string             // the proxy face's Unix socket, <run>/egressd/proxy.sock
	CABundlePath  string             // where the public CA bundle is written, <public>/egressd-ca.pem
	SecretdSocket string             // -secretd-socket: secretd's API socket (default <run>/secretd/api.sock)
	HostMap       transport.HostMap  // -resolve entries: the only way to reach a non-public address by name
	RootCAs       *x509.CertPool     // nil: system roots
	Owner         loopowner.Checker  // the loopback listener owner check, with -agent-uids
	AuditFsync    bool               // -audit-fsync always (true) or never
	MaxBody       int                // -max-request-body: bytes of a request body read whole (default 32 MiB)
	MaxResponse   int                // 0: no cap
	BufferBudget  int                // -buffer-budget: bytes of request bodies held at once, all requests (default 256 MiB)
	Timeouts      timeouts           // the exchange's timeouts by phase
	Strip         []string           // -strip-response-header: response headers removed
	ExtraCAPEM    []byte             // -ca-file's content, also put in the public CA bundle
	Anonymous     *egressdapi.Policy // nil: anonymous proxy use refused
	Proxy         proxyLimits        // the proxy face's limits
}

// timeouts are the exchange's timeouts by phase (zero Total: none).
type timeouts struct {
	Dial, TLSHandshake, ResponseHeader, Idle, Total time.Duration // the -dial-timeout, ... -total-timeout flags
	// Renamed holds a warning for each deprecated flag name used.
	Renamed []string
}

// proxyLimits are the proxy face's limits (proxy.Config).
type proxyLimits struct {
	MaxTunnels, MaxHeader int           // -proxy-max-tunnels (tunnels); -proxy-max-header-bytes (bytes)
	Handshake, Idle       time.Duration // -proxy-handshake-timeout; -proxy-idle-timeout
	AuthAuditRate         float64       // -proxy-auth-audit-rate: failed authentications audited per second
	InvTunnels            int           // -proxy-max-tunnels-per-invocation (0: a quarter of MaxTunnels)
	InvRequests           int           // -proxy-max-requests-per-invocation
	InvStreams            int           // -proxy-max-streams-per-invocation (0: a quarter of MaxConns)
	MaxConns              int           // -proxy-max-conns: open proxy client connections
	ReregisterGrace       time.Duration // 0: none
}

func (f *flags) config(l daemon.Layout) (*Config, error) {
	c := &Config{
		ProxySocket:   filepath.Join(l.Run, daemon.NameEgressd, "proxy.sock"),
		CABundlePath:  filepath.Join(l.Public, "egressd-ca.pem"),
		SecretdSocket: f.secretdSocket,
		HostMap:       transport.HostMap{},
		MaxBody:       f.maxBody,
		MaxResponse:   f.maxResponse,
		BufferBudget:  f.budget,
		Timeouts:      timeouts{Dial: f.dial, TLSHandshake: f.tlsHandshake, ResponseHeader: f.respHeader, Idle: f.exchangeIdle, Total: f.total},
		Strip:         f.strip,
		Proxy: proxyLimits{MaxTunnels: f.maxTunnels, MaxHeader: f.maxHeader, Handshake: f.handshake, Idle: f.idle,
			AuthAuditRate: f.authAudit, InvTunnels: f.invTunnels, InvRequests: f.invRequests, InvStreams: f.invStreams, MaxConns: f.maxConns,
			ReregisterGrace: f.grace},
	}
	var err error
	if c.ProxyAddress, err = netip.ParseAddrPort(f.proxyAddress); err != nil {
		return nil, fmt.Errorf("-proxy-address: %w", err)
	}
	if c.SecretdSocket == "" {
		c.SecretdSocket = l.Socket(daemon.NameSecretd)
	}
	for _, r := range f.resolve {
		if err := c.HostMap.ParseResolve(r); err != nil {
			return nil, fmt.Errorf("-resolve: %w", err)
		}
	}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("-ca-file: %w", err)
		}
		if c.RootCAs, err = x509.SystemCertPool(); err != nil {
			c.RootCAs = x509.NewCertPool()
		}
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca-file: %s holds no PEM certificate", f.caFile)
		}
		c.ExtraCAPEM = pem
	}
	lo, hi, ok := strings.Cut(f.agentUIDs, "-")
	a, err1 := strconv.ParseUint(lo, 10, 32)
	b, err2 := strconv.ParseUint(hi, 10, 32)
	if !ok || err1 != nil || err2 != nil || a > b || a == 0 {
		return nil, fmt.Errorf("-agent-uids: want FIRST-LAST, got %q", f.agentUIDs)
	}
	c.Owner = loopowner.Checker{AgentMin: uint32(a), AgentMax: uint32(b)}
	switch f.auditFsync {
	case "always":
		c.AuditFsync = true
	case "never":
	default:
		return nil, fmt.Errorf("-audit-fsync: want always or never, got %q", f.auditFsync)
	}
	if f.oldTimeout {
		c.Timeouts.Renamed = append(c.Timeouts.Renamed, "-request-timeout is now -total-timeout; the old name goes in the next release")
	}
	if c.MaxBody <= 0 || c.BufferBudget < c.MaxBody || c.MaxResponse < 0 {
		return nil, fmt.Errorf("-max-request-body must be positive, -buffer-budget at least -max-request-body, -max-response-body not negative")
	}
	if f.dial <= 0 || f.tlsHandshake <= 0 || f.respHeader <= 0 || f.exchangeIdle <= 0 || f.total < 0 {
		return nil, fmt.Errorf("-dial-timeout, -tls-handshake-timeout, -response-header-timeout and -idle-timeout must be positive, -total-timeout not negative")
	}
	if f.maxTunnels <= 0 || f.maxHeader <= 0 || f.handshake <= 0 || f.idle <= 0 || !(f.authAudit > 0) ||
		f.invTunnels < 0 || f.invRequests <= 0 || f.invStreams < 0 || f.maxConns <= 0 {
		return nil, fmt.Errorf("the -proxy-* limits must be positive")
	}
	if f.grace < 0 {
		return nil, fmt.Errorf("-reregister-grace must not be negative")
	}
	if len(f.anonymous) > 0 {
		c.Anonymous = &egressdapi.Policy{}
		for _, o := range f.anonymous {
			c.Anonymous.Allow = append(c.Anonymous.Allow, egressdapi.AllowRule{Origin: o})
		}
	}
	return c, nil
}
