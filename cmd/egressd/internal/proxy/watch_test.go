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
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

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

// TestPipelinedDuringStream: a request the client sends on the same
// tunnel while an answer streams is served after it, whole. The client
// watch reads its first byte from the socket while the connection's
// reader is back in the pool (and gives that byte back in front of the
// request); a request already buffered with the first is left in the
// reader, unwatched. Either way the second answer is a 200 with its own
// body, and neither the secret nor a broken request line shows.
func TestPipelinedDuringStream(t *testing.T) {
	t.Parallel()
	const secret = "watch-secret-value-0123456789"
	const ph = "hkp_abcdefghijklmnopqrstuvwxyz234567"
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	upLeaf, err := ca.Leaf("up.test")
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{}, 1)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/second" {
			io.WriteString(w, r.Method+" second answer") // a lost first byte shows in the method
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: two\n\n")
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{*upLeaf}, NextProtos: []string{"http/1.1"}}
	up.StartTLS()
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	authority := "up.test:" + port
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	sc := redact.NewScrubber()
	al, err := audit.Open(audit.Options{Dir: t.TempDir(), Daemon: "egressd", Scrubber: sc, Fsync: audit.FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	defer al.Close()
	logs := &egresstest.Buffer{}
	log := daemon.NewLogger(logs, slog.LevelInfo, sc, "egressd")
	cons := &egresstest.Consumer{Leases: []secretdapi.Lease{{Credential: "api", Destination: "https://" + authority, Placeholder: ph,
		Target: "header:Authorization", Template: "Bearer {}", Value: []byte(secret)}}}
	reg := bundle.NewRegistry(cons, sc)
	defer reg.DropAll()
	tok := strings.Repeat("w", 43)
	if _, err := reg.Register(context.Background(), &egressdapi.BundleRegisterRequest{Invocation: "watch", ProxyToken: tok,
		Handles: [][]byte{{1}}}); err != nil {
		t.Fatal(err)
	}
	tr := transport.New(transport.Config{HostMap: transport.HostMap{authority: netip.MustParseAddr("127.0.0.1")}, RootCAs: roots})
	defer tr.Close()
	p := pipeline.New(pipeline.Config{Registry: reg, Transport: tr, Owner: noOwner{}, Audit: al, Logger: log})
	srv := New(Config{Registry: reg, Pipeline: p, Transport: tr, CA: ca, Audit: al, Logger: log})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { srv.Serve(l, "tcp"); close(served) }()
	defer func() { srv.Close(); <-served }()

	req := func(path string) string {
		return fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", path, authority, ph)
	}
	for _, tc := range []struct {
		name     string
		together bool // the second request goes with the first
	}{
		{name: "second request while the answer streams", together: false},
		{name: "second request sent with the first", together: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			raw, err := net.Dial("tcp", l.Addr().String())
			is.NoErr(err)
			defer raw.Close()
			_ = raw.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(raw, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n",
				authority, authority, base64.StdEncoding.EncodeToString([]byte("watch:"+tok)))
			cresp, err := http.ReadResponse(bufio.NewReaderSize(raw, 16), nil) // a 200 without a body: nothing read past it
			is.NoErr(err)
			is.Equal(cresp.StatusCode, http.StatusOK)
			c := tls.Client(raw, &tls.Config{ServerName: "up.test", RootCAs: roots, NextProtos: []string{"http/1.1"}})
			first := req("/events")
			if tc.together {
				first += req("/second")
			}
			_, err = io.WriteString(c, first)
			is.NoErr(err)
			br := bufio.NewReader(c)
			r1, err := http.ReadResponse(br, nil)
			is.NoErr(err)
			is.Equal(r1.StatusCode, http.StatusOK)
			readEvent(t, r1.Body) // the stream is open, egressd waits for its next event
			if !tc.together {
				_, err = io.WriteString(c, req("/second"))
				is.NoErr(err)
				time.Sleep(50 * time.Millisecond) // let the watch read its byte (the test holds either way)
			}
			gate <- struct{}{}
			rest, err := io.ReadAll(r1.Body)
			is.NoErr(err)
			is.Equal(string(rest), "data: two\n\n")
			r2, err := http.ReadResponse(br, nil)
			is.NoErr(err)
			body, err := io.ReadAll(r2.Body)
			is.NoErr(err)
			is.Equal(r2.StatusCode, http.StatusOK)
			is.Equal(string(body), "GET second answer")
		})
	}
	is := is.New(t)
	is.True(!strings.Contains(logs.String(), secret))
	is.True(!strings.Contains(logs.String(), "egress.invalid_request"))
}
