package pipeline

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/cmd/egressd/internal/loopowner"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

const (
	token  = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	canary = "canary:Zq8v1X/value+7d1e="
	ph     = "hkp_abcdefghijklmnopqrstuvwxyz234567"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type fixture struct {
	t        testing.TB
	p        *Pipeline
	reg      *bundle.Registry
	stub     *egresstest.Consumer
	logs     *syncBuffer
	auditDir string
	outputs  []string // every error and response body seen, for the canary scan
	mu       sync.Mutex
	dialled  []netip.AddrPort
}

type fixtureConfig struct {
	hostMap  transport.HostMap
	resolver transport.Resolver
	ca       []byte // PEM of the upstream CA
	owner    OwnerChecker
	maxResp  int
}

func newFixture(t testing.TB, fc fixtureConfig) *fixture {
	t.Helper()
	f := &fixture{t: t, logs: &syncBuffer{}, auditDir: t.TempDir()}
	sc := redact.NewScrubber()
	f.stub = &egresstest.Consumer{}
	f.reg = bundle.NewRegistry(f.stub, sc)
	al, err := audit.Open(audit.Options{Dir: f.auditDir, Daemon: "egressd", Scrubber: sc, Fsync: audit.FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { al.Close() })
	tc := transport.Config{HostMap: fc.hostMap, Resolver: fc.resolver, OnDial: func(a netip.AddrPort) {
		f.mu.Lock()
		f.dialled = append(f.dialled, a)
		f.mu.Unlock()
	}}
	if fc.ca != nil {
		tc.RootCAs = poolFrom(t, fc.ca)
	}
	tr := transport.New(tc)
	t.Cleanup(tr.Close)
	if fc.owner == nil {
		fc.owner = loopowner.Checker{}
	}
	logger := slog.New(redact.NewHandler(slog.NewJSONHandler(f.logs, nil), sc))
	f.p = New(Config{Registry: f.reg, Transport: tr, Owner: fc.owner, Audit: al, Logger: logger, MaxResponse: fc.maxResp})
	t.Cleanup(f.checkCanary)
	return f
}

// register adds a bundle for inv holding leases, allowed to reach origins.
func (f *fixture) register(inv string, leases []secretdapi.Lease, origins ...string) {
	f.t.Helper()
	req := &egressdapi.BundleRegisterRequest{Invocation: inv, ProxyToken: token}
	for i := range leases {
		req.Handles = append(req.Handles, []byte{byte(i + 1)})
	}
	for _, o := range origins {
		req.Policy.Allow = append(req.Policy.Allow, egressdapi.AllowRule{Origin: o})
	}
	f.stub.Leases = leases
	if _, err := f.reg.Register(context.Background(), req); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) do(in Input) (*Output, error) {
	if in.Invocation == "" {
		in.Invocation = "inv"
	}
	if in.Method == "" {
		in.Method = "GET"
	}
	out, err := f.p.Do(context.Background(), in)
	f.mu.Lock()
	if err != nil {
		f.outputs = append(f.outputs, err.Error(), wire.AsError(err).Msg)
	}
	if out != nil {
		f.outputs = append(f.outputs, string(out.Body))
		for _, h := range out.Header {
			f.outputs = append(f.outputs, h.Name+": "+h.Value)
		}
	}
	f.mu.Unlock()
	return out, err
}

// checkCanary scans every log line, audit record, error and response for
// the canary in any encoding the scrubber knows.
func (f *fixture) checkCanary() {
	check := func(what, s string) {
		if leaks(s) {
			f.t.Errorf("canary found in %s: %q", what, s)
		}
	}
	check("logs", f.logs.String())
	b, _ := os.ReadFile(filepath.Join(f.auditDir, audit.DefaultName))
	check("audit", string(b))
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range f.outputs {
		check("output", o)
	}
}

func hdr(kv ...string) []request.Field {
	var out []request.Field
	for i := 0; i < len(kv); i += 2 {
		out = append(out, request.Field{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

func lease(dest, target, template string) secretdapi.Lease {
	return secretdapi.Lease{Credential: "api", Destination: dest, Placeholder: ph, Target: target, Template: template, Value: []byte(canary)}
}

func encodings(v string) []string {
	return []string{v, base64.StdEncoding.EncodeToString([]byte(v)), hex.EncodeToString([]byte(v)), url.QueryEscape(v)}
}

func poolFrom(t testing.TB, pemBytes []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemBytes) {
		t.Fatal("bad CA PEM")
	}
	return p
}

// leaks reports whether s holds the canary in any encoding the scrubber
// knows, or double percent-encoded.
func leaks(s string) bool {
	probe := redact.NewScrubber()
	probe.Register([]byte(canary))
	return probe.Contains([]byte(s)) || strings.Contains(s, url.QueryEscape(url.QueryEscape(canary)))
}
