package proxy

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/redact"
)

// harnessCanary is the held value of the in-process tests.
const harnessCanary = "sk_CAN4RYx9ZqLp7TvW2m"

// harness is a proxy face in process: a TCP listener and a Unix socket,
// a bundle "cred" holding harnessCanary for https://api.example.com
// (its tunnels are intercepted) and a bundle "open" without credentials,
// both allowed https://*.example.com. api.example.com is in the host map
// (127.0.0.1); every other name goes to the recording resolver.
type harness struct {
	tcp, unix string
	rec       *egresstest.Lookups
	logs      *egresstest.Buffer
	auditDir  string
	ca        *CA
	tokCred   string
	tokOpen   string
}

func newHarness(t *testing.T, cfg func(*Config)) *harness {
	t.Helper()
	h := &harness{rec: &egresstest.Lookups{}, logs: &egresstest.Buffer{}, auditDir: t.TempDir(),
		tokCred: strings.Repeat("c", 43), tokOpen: strings.Repeat("o", 43)}
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h.ca = ca
	sc := redact.NewScrubber()
	al, err := audit.Open(audit.Options{Dir: h.auditDir, Daemon: "egressd", Scrubber: sc, Fsync: audit.FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { al.Close() })
	log := daemon.NewLogger(h.logs, slog.LevelInfo, sc, "egressd")
	cons := &egresstest.Consumer{Leases: []secretdapi.Lease{{Credential: "api", Destination: "https://api.example.com", Placeholder: "hkp_abcdefghijklmnopqrstuvwxyz234567",
		Target: "header:Authorization", Template: "Bearer {}", Value: []byte(harnessCanary)}},
		Placeholders: map[string]string{"\x02": "hkp_22222222222222222222222222222222"}} // a second bundle's (handle 2)
	reg := bundle.NewRegistry(cons, sc)
	t.Cleanup(reg.DropAll)
	allow := egressdapi.Policy{Allow: []egressdapi.AllowRule{{Origin: "https://*.example.com"}}}
	for _, r := range []*egressdapi.BundleRegisterRequest{
		{Invocation: "cred", ProxyToken: h.tokCred, Policy: allow, Handles: [][]byte{{1}}},
		{Invocation: "open", ProxyToken: h.tokOpen, Policy: allow},
	} {
		if _, err := reg.Register(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	tr := transport.New(transport.Config{HostMap: transport.HostMap{"api.example.com:443": netip.MustParseAddr("127.0.0.1")},
		Resolver: h.rec, OnDial: h.rec.Dial, DialTimeout: 2 * time.Second})
	t.Cleanup(tr.Close)
	p := pipeline.New(pipeline.Config{Registry: reg, Transport: tr, Owner: noOwner{}, Audit: al, Logger: log, TotalTimeout: 5 * time.Second})
	c := Config{Registry: reg, Pipeline: p, Transport: tr, CA: ca, Audit: al, Logger: log, DialTimeout: 2 * time.Second}
	if cfg != nil {
		cfg(&c)
	}
	srv := New(c)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/tmp", "hkpx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h.unix = filepath.Join(dir, "p.sock")
	ul, err := net.Listen("unix", h.unix)
	if err != nil {
		t.Fatal(err)
	}
	h.tcp = l.Addr().String()
	done := make(chan struct{}, 2)
	go func() { srv.Serve(l, "tcp"); done <- struct{}{} }()
	go func() { srv.Serve(ul, "unix"); done <- struct{}{} }()
	t.Cleanup(func() { srv.Close(); <-done; <-done })
	return h
}

// dialers are the two listeners of a harness, by name.
func (h *harness) dialers() map[string]func() (net.Conn, error) {
	return map[string]func() (net.Conn, error){
		"tcp":  func() (net.Conn, error) { return net.Dial("tcp", h.tcp) },
		"unix": func() (net.Conn, error) { return net.Dial("unix", h.unix) },
	}
}

// auth is the Proxy-Authorization field line of invocation inv.
func (h *harness) auth(inv string) string {
	tok := h.tokOpen
	if inv == "cred" {
		tok = h.tokCred
	}
	return "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(inv+":"+tok)) + "\r\n"
}

// exchange writes raw on a new connection from dial and reads one
// answer; with closed set it also reports whether the connection was
// then closed (the next read ends within a second).
func exchange(t *testing.T, dial func() (net.Conn, error), raw string, halfClose, closed bool) (*http.Response, []byte, bool) {
	t.Helper()
	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	if halfClose {
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}
	return readAnswer(t, c, bufio.NewReader(c), closed)
}

// readAnswer reads one answer from br and, with closed set, reports
// whether c was closed after it (the next read fails, not by timing out).
func readAnswer(t *testing.T, c net.Conn, br *bufio.Reader, closed bool) (*http.Response, []byte, bool) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no HTTP answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !closed {
		return resp, body, false
	}
	// A connection egressd keeps open shows nothing within a second (one
	// it closes ends at once): the wait only bounds the keep-alive case.
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err = br.ReadByte()
	// EOF, or a reset when egressd closed with bytes of ours unread.
	var ne net.Error
	return resp, body, err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// auditText is the harness's audit log.
func (h *harness) auditText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.auditDir, audit.DefaultName))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitAudit reports whether one record of the audit log holds every one
// of want within 10 s: a record may be written just after the answer the
// test read.
func (h *harness) waitAudit(t *testing.T, want ...string) bool {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		for _, line := range strings.Split(h.auditText(t), "\n") {
			if containsAll(line, want) {
				return true
			}
		}
		if time.Now().After(end) {
			return false
		}
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// checkCanary scans the audit log, the log and each of outputs for the
// canary in every form the scanner knows, host forms included.
func (h *harness) checkCanary(t *testing.T, outputs ...string) {
	t.Helper()
	probe := redact.NewScrubber()
	probe.Register([]byte(harnessCanary))
	for what, s := range map[string]string{"audit": h.auditText(t), "log": h.logs.String(), "answers": strings.Join(outputs, "\n")} {
		if probe.Contains([]byte(s)) || probe.ContainsDecoded([]byte(s)) || probe.ContainsInHost(s) {
			t.Errorf("the canary is in the %s: %q", what, s)
		}
	}
}
