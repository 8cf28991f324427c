//go:build linux

package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/secretdapi"
	api "hostkit.dev/lib/api/supervisordapi"

	"hostkit.dev/cmd/supervisord/internal/store"
)

// TestTransparentEgressEndToEnd: in an isolated instance, a program that
// ignores the proxy variables (Python's own sockets and ssl, resolving
// through the namespace's resolver) gets exactly the proxied decisions
// from a real egressd: its placeholder is substituted for the approved
// destination, is placeholder_misuse at another allowed name, a TLS
// server name other than the resolved name is refused, a raw TCP
// connection is refused (the instance holds a credential), and a name the
// policy does not allow is REFUSED by the resolver.
func TestTransparentEgressEndToEnd(t *testing.T) {
	is := is.New(t)
	s := newEgressStack(t)
	script, err := os.ReadFile("testdata/tclient.py")
	is.NoErr(err)
	port := strings.TrimPrefix(s.origin, "https://api.test:")
	// other.test is allowed and resolves to the same loopback upstream.
	s.egArgs = append(s.egArgs, "-resolve", "other.test:"+port+":127.0.0.1")
	s.restartEgressd(t)
	time.Sleep(300 * time.Millisecond) // supervisord's poll sees the new epoch
	in, err := s.c.Provision(context.Background(), &api.ProvisionRequest{Command: []string{"/usr/bin/python3", "-c", string(script), port},
		WorkingDir: "/tmp", Start: true, StopTimeoutMS: 1000,
		Network:     &api.Network{Mode: api.NetworkIsolated, Allow: []string{s.origin, "https://other.test:" + port}},
		Credentials: []api.CredentialSpec{{Credential: "api", Env: "API_TOKEN"}}})
	is.NoErr(err)
	out := s.waitLog(in.InstanceID, "done", 60*time.Second)
	t.Logf("agent: %s", out)
	is.True(strings.Contains(out, "resolve-api ip=198.1"))
	is.True(strings.Contains(out, "resolve-other ip=198.1"))
	is.True(strings.Contains(out, "resolve-denied rcode=5"))    // REFUSED, never forwarded
	is.True(strings.Contains(out, "approved status=200 code=")) // substituted and answered
	is.True(strings.Contains(out, "elsewhere status=403 code=egress.placeholder_misuse"))
	is.True(strings.Contains(out, "sni-mismatch error=")) // the handshake is refused
	is.True(strings.Contains(out, "raw error=") || strings.Contains(out, "raw read=0"))
	is.Equal(s.received(), []string{"Bearer " + egressCanary}) // only the approved request arrived
	is.True(!strings.Contains(out, egressCanary))
}

// dnsLabelCanary is data an agent puts into a query's labels.
const dnsLabelCanary = "c2stQ0FOQVJZLWUyZS1kbnM"

// tclientBin copies this test binary where an agent's uid can run it
// (TestMain's 0755 directory), once.
var tclientBin = sync.OnceValues(func() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(self)
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(binary), "tclient")
	return p, os.WriteFile(p, b, 0o755)
})

// streamUpstream is stream.test: HTTP/2 by ALPN, server-sent events that
// wait after the first event until release is closed, and a WebSocket
// echo; every answer needs the real credential, and each Authorization
// received is recorded.
func streamUpstream(t *testing.T, s *egressStack, release <-chan struct{}) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var auths []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Proto+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+egressCanary {
			http.Error(w, "no credential", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/h2":
			io.WriteString(w, "h2-ok\n")
		case "/sse":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			select { // the client has printed the first event: it was not held back
			case <-release:
			case <-time.After(60 * time.Second):
			}
			io.WriteString(w, "data: two\n\ndata: three\n\n")
		case "/ws":
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
				wsAccept(r.Header.Get("Sec-WebSocket-Key")))
			brw.Flush()
			c.SetDeadline(time.Now().Add(60 * time.Second))
			if p, err := wsRead(brw); err == nil {
				c.Write(wsFrame(p, false))
			}
		}
	})
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{s.ca.leaf(t, "stream.test")}, NextProtos: []string{"h2", "http/1.1"}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), auths...)
	}
}

// TestTransparentEgressStreams: in an isolated instance whose policy
// allows nothing, a Go program that ignores the proxy variables reaches
// its credential's destination (which the resolver answers for because
// the credential names it) over DNS on TCP, and every feature of the
// proxied path works through the transparent one with the placeholder
// substituted: HTTP/2 by ALPN, server-sent events that arrive as sent
// (the second only after the test saw the first), and a WebSocket echo.
// A refused name whose labels carry data is audited by supervisord with
// its shape, and is in no log or audit record.
func TestTransparentEgressStreams(t *testing.T) {
	is := is.New(t)
	s := newEgressStack(t)
	bin, err := tclientBin()
	is.NoErr(err)
	release := make(chan struct{})
	up, received := streamUpstream(t, s, release)
	port := strconv.Itoa(up.Listener.Addr().(*net.TCPAddr).Port)
	ctx := context.Background()
	_, err = s.sdc.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: "stream", Value: []byte(egressCanary),
		Destinations: []string{"https://stream.test:" + port}, Targets: []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}}}, "")
	is.NoErr(err)
	s.egArgs = append(s.egArgs, "-resolve", "stream.test:"+port+":127.0.0.1")
	s.restartEgressd(t)
	time.Sleep(300 * time.Millisecond) // supervisord's poll sees the new epoch
	denied := dnsLabelCanary + ".exfil.example"
	in, err := s.c.Provision(ctx, &api.ProvisionRequest{Command: []string{bin}, WorkingDir: "/tmp", Start: true, StopTimeoutMS: 1000,
		Env:         map[string]string{tclientEnv: port, tclientDeniedEnv: denied},
		Network:     &api.Network{Mode: api.NetworkIsolated}, // no origin allowed: only the credential's destination resolves
		Credentials: []api.CredentialSpec{{Credential: "stream", Env: "API_TOKEN"}}})
	is.NoErr(err)
	s.waitLog(in.InstanceID, "sse event=one", 90*time.Second)
	close(release)
	out := s.waitLog(in.InstanceID, "done", 90*time.Second)
	t.Logf("agent: %s", out)
	is.True(strings.Contains(out, "dns-tcp-allowed rcode=0 addr=198.1"))
	is.True(strings.Contains(out, "dns-tcp-denied rcode=5 err=<nil>"))
	is.True(strings.Contains(out, "h2 proto=HTTP/2.0 status=200 body=h2-ok"))
	is.True(strings.Contains(out, "sse status=200 type=text/event-stream"))
	is.True(strings.Contains(out, "sse event=one\nsse event=two\nsse event=three\nsse end err=<nil>"))
	is.True(strings.Contains(out, `ws echo="hello through the bridge" err=<nil>`))
	is.True(!strings.Contains(out, egressCanary))
	for _, a := range received() { // every request arrived with the real value
		is.True(strings.HasSuffix(a, " Bearer "+egressCanary))
	}
	is.Equal(len(received()), 3)

	var md store.Metadata
	b, err := os.ReadFile(filepath.Join(s.root, "state", "supervisord", "instances", in.InstanceID, store.FileMetadata))
	is.NoErr(err)
	is.NoErr(json.Unmarshal(b, &md))
	is.Equal(md.Spec.Destinations, []string{"https://stream.test:" + port}) // kept for restarts and adoption

	// The refusal reaches supervisord's audit trail by its shape only.
	var rec string
	for end := time.Now().Add(30 * time.Second); rec == "" && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(s.root, "log", "supervisord", "audit.jsonl"))
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `"op":"network.dns_refused"`) && strings.Contains(l, in.InstanceID) {
				rec = l
			}
		}
	}
	is.True(rec != "")
	is.True(strings.Contains(rec, `"shape":"{23}.{5}.{7}"`))
	is.True(strings.Contains(rec, `"reason":"policy"`))
	for _, f := range []string{filepath.Join(s.root, "log", "supervisord", "audit.jsonl"),
		filepath.Join(s.root, "state", "supervisord", "instances", in.InstanceID, "holder.err")} {
		b, err := os.ReadFile(f)
		is.NoErr(err)
		is.True(!strings.Contains(string(b), dnsLabelCanary)) // f
		is.True(!strings.Contains(string(b), egressCanary))   // f
	}
}
