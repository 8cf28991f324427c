package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"testing"

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

// noOwner passes every loopback owner check without naming an owner: the
// benchmark's upstream is on loopback, where bench/proxy's (c) reaches a
// non-loopback address, which has no owner check and no listener_uids
// field in its audit records.
type noOwner struct{}

func (noOwner) Check(netip.AddrPort) ([]uint32, error) { return nil, nil }

// BenchmarkProxyIntercepted measures one request inside an intercepted
// CONNECT tunnel, in process, as bench/proxy (c) sends them: a bundle
// with one credential staged as "Authorization: Bearer {}", the client's
// request carrying the placeholder there, TLS terminated with the CA's
// leaf, the whole pipeline (placement, policy, scan, substitution, two
// audit records with FsyncNever, the decision line to io.Discard, the
// response scrubbed) and a verified TLS upstream that answers 64 bytes
// from a canned reply. "serial" sends one request at a time over one
// kept-alive tunnel and reports allocations per request (the whole
// process: the client's TLS and ReadResponse and the upstream's TLS are
// included); "tunnels32" keeps 32 tunnels busy at once, as bench/proxy
// (c) does, for CPU profiles (egressd's share is what runs under
// Server.Serve).
func BenchmarkProxyIntercepted(b *testing.B) {
	const secret = "bench-secret-value-0123456789"
	const ph = "hkp_abcdefghijklmnopqrstuvwxyz234567"
	ca, err := LoadOrCreateCA(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	upLeaf, err := ca.Leaf("up.test")
	if err != nil {
		b.Fatal(err)
	}
	reply := "HTTP/1.1 200 OK\r\nContent-Length: 64\r\nContent-Type: text/plain; charset=utf-8\r\nDate: Tue, 01 Dec 2026 12:00:00 GMT\r\n\r\n" + strings.Repeat("x", 64)
	upAddr := cannedTLSUpstream(b, &tls.Config{Certificates: []tls.Certificate{*upLeaf}, NextProtos: []string{"http/1.1"}}, reply)
	_, port, _ := net.SplitHostPort(upAddr)
	authority := "up.test:" + port

	sc := redact.NewScrubber()
	al, err := audit.Open(audit.Options{Dir: b.TempDir(), Daemon: "egressd", Scrubber: sc, Fsync: audit.FsyncNever})
	if err != nil {
		b.Fatal(err)
	}
	defer al.Close()
	log := daemon.NewLogger(io.Discard, slog.LevelInfo, sc, "egressd")
	cons := &egresstest.Consumer{Leases: []secretdapi.Lease{{Credential: "api", Destination: "https://" + authority, Placeholder: ph,
		Target: "header:Authorization", Template: "Bearer {}", Value: []byte(secret)}}}
	reg := bundle.NewRegistry(cons, sc)
	tok := strings.Repeat("a", 43)
	if _, err := reg.Register(context.Background(), &egressdapi.BundleRegisterRequest{Invocation: "bench", ProxyToken: tok,
		Handles: [][]byte{{1}}}); err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	tr := transport.New(transport.Config{HostMap: transport.HostMap{authority: netip.MustParseAddr("127.0.0.1")}, RootCAs: roots})
	defer tr.Close()
	p := pipeline.New(pipeline.Config{Registry: reg, Transport: tr, Owner: noOwner{}, Audit: al, Logger: log})
	srv := New(Config{Registry: reg, Pipeline: p, Transport: tr, CA: ca, Audit: al, Logger: log})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(l, "tcp")
	defer srv.Close()

	tunnel := func() (one func() error, closeFn func()) {
		raw, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(raw, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n",
			authority, authority, base64.StdEncoding.EncodeToString([]byte("bench:"+tok)))
		rbr := bufio.NewReader(raw)
		cresp, err := http.ReadResponse(rbr, nil)
		if err != nil || cresp.StatusCode != 200 {
			b.Fatalf("CONNECT: %v %v", cresp, err)
		}
		c := tls.Client(raw, &tls.Config{ServerName: "up.test", RootCAs: roots, NextProtos: []string{"http/1.1"}})
		req := []byte(fmt.Sprintf("GET /bench HTTP/1.1\r\nHost: %s\r\nUser-Agent: Go-http-client/1.1\r\nAuthorization: Bearer %s\r\nAccept-Encoding: gzip\r\n\r\n", authority, ph))
		br := bufio.NewReader(c)
		return func() error {
			if _, err := c.Write(req); err != nil {
				return err
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("status %d: %s", resp.StatusCode, resp.Header.Get(HeaderError))
			}
			return nil
		}, func() { c.Close() }
	}
	b.Run("serial", func(b *testing.B) {
		one, done := tunnel()
		defer done()
		if err := one(); err != nil { // handshakes, upstream dial
			b.Fatal(err)
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		b.ResetTimer()
		for range b.N {
			if err := one(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "process-allocs/req")
	})
	// As bench/proxy (c) loads it: 32 tunnels at once (16 per core here).
	b.Run("tunnels32", func(b *testing.B) {
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			one, done := tunnel()
			defer done()
			for pb.Next() {
				if err := one(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// cannedTLSUpstream is cannedUpstream over TLS with cfg, and checks that
// the substituted value arrived (a wrong Authorization gets a 401).
func cannedTLSUpstream(b *testing.B, cfg *tls.Config, reply string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				tc := tls.Server(c, cfg)
				defer tc.Close()
				br := bufio.NewReader(tc)
				for {
					authorized := false
					for {
						line, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						if len(line) <= 2 {
							break
						}
						if strings.HasPrefix(string(line), "Authorization: Bearer bench-secret-value-0123456789\r") {
							authorized = true
						}
					}
					r := reply
					if !authorized {
						r = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"
					}
					if _, err := io.WriteString(tc, r); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}
