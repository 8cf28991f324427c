//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/api/secretdapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/buildtest"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

const egressCanary = "CANARY-supervisord-egress-5b1e9d"

// gitRef is the one ref the upstream's git repository advertises.
const gitRef = "0123456789abcdef0123456789abcdef01234567"

// peerBins is the error of linking secretd and egressd beside binary,
// once for the egress tests.
var peerBins = sync.OnceValue(func() error {
	// Their own module directories, so the workspace may be off: the
	// supervisord module does not require them.
	return buildtest.Install(context.Background(), filepath.Dir(binary), "../secretd", "../egressd")
})

// buildPeers returns the directory that holds secretd and egressd, built
// once for all test processes (buildtest).
func buildPeers(t *testing.T) string {
	t.Helper()
	if err := peerBins(); err != nil {
		t.Fatalf("cannot build secretd and egressd: %v", err)
	}
	return filepath.Dir(binary)
}

// peer is a secretd or egressd child process.
type peer struct {
	cmd    *exec.Cmd
	stderr *lockedBuf
	rc     *rpc.Client
	done   chan struct{} // closed once the process was reaped
}

// kill kills p with SIGKILL and waits until it was reaped: its socket
// lock is free then. A loaded machine can take seconds to end a killed
// process, so the wait is bounded generously and fails loudly.
func (p *peer) kill(t *testing.T) {
	t.Helper()
	p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not end within 60 s of SIGKILL", p.cmd.Path)
	}
}

func startPeer(t *testing.T, bin, name, root string, args ...string) *peer {
	t.Helper()
	p := &peer{stderr: &lockedBuf{}}
	p.cmd = exec.Command(filepath.Join(buildPeers(t), bin), append([]string{"-root", root}, args...)...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	daemons.Store(p.cmd.Process.Pid, true)
	done := make(chan struct{})
	p.done = done
	go func() { p.cmd.Wait(); close(done) }()
	p.rc = rpc.NewClient(filepath.Join(root, "run", name, "api.sock"), 10*time.Second)
	t.Cleanup(func() {
		p.rc.Close()
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			<-done
		}
	})
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := healthapi.Get(ctx, p.rc)
		cancel()
		if err == nil {
			return p
		}
		if i > 500 {
			t.Fatalf("%s did not start: %v\n%s", bin, err, p.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testCA is a throwaway CA for the loopback HTTPS upstream.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "supervisord test CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leaf is a server certificate for name signed by ca.
func (ca *testCA) leaf(t *testing.T, name string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// server starts an HTTPS server on 127.0.0.1 for name.
func (ca *testCA) server(t *testing.T, name string, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, name)}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// egressStack is secretd, egressd and supervisord under one root, with an
// HTTPS upstream api.test that records the Authorization it receives.
type egressStack struct {
	*env
	sd, eg   *peer
	egArgs   []string
	origin   string // https://api.test:PORT
	mu       sync.Mutex
	auths    []string
	byPath   []string // "path Authorization" of every request, in order
	hits     []hit    // every request the upstream received, in order
	sdc      *secretdapi.Client
	egc      *egressdapi.Client
	caFile   string
	ca       *testCA // signs the upstreams' certificates (egressd trusts it)
	upstream *httptest.Server
}

// paths is "path Authorization" of every request the upstream received.
func (s *egressStack) paths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.byPath...)
}

func (s *egressStack) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auths...)
}

func newEgressStack(t *testing.T, supervisordArgs ...string) *egressStack {
	t.Helper()
	return newEgressStackIn(t, "/tmp", supervisordArgs...)
}

// newEgressStackIn is newEgressStack with the root made under base.
func newEgressStackIn(t *testing.T, base string, supervisordArgs ...string) *egressStack {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (agents run under their own uid; egressd checks loopback listeners' owners)")
	}
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Fatal("needs /usr/bin/curl (scripts/setup installs it)")
	}
	is := is.New(t)
	root, err := os.MkdirTemp(base, "hk")
	is.NoErr(err)
	os.Chmod(root, 0o755) // agents read the public CA bundle under it
	ca := newTestCA(t)
	s := &egressStack{env: &env{t: t, root: root}, ca: ca}
	s.caFile = filepath.Join(root, "test-ca.pem")
	is.NoErr(os.WriteFile(s.caFile, ca.pem, 0o644))
	s.upstream = ca.server(t, "api.test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auths = append(s.auths, r.Header.Get("Authorization"))
		s.byPath = append(s.byPath, r.URL.Path+" "+r.Header.Get("Authorization"))
		s.hits = append(s.hits, hit{path: r.URL.Path, auth: r.Header.Get("Authorization"), at: time.Now()})
		s.mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/info/refs") { // git's dumb HTTP protocol: one ref
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, gitRef+"\trefs/heads/main\n")
			return
		}
		io.WriteString(w, "upstream-ok\n")
	}))
	port := strconv.Itoa(s.upstream.Listener.Addr().(*net.TCPAddr).Port)
	s.origin = "https://api.test:" + port
	s.sd = startPeer(t, "secretd", "secretd", root)
	// No re-registration grace: these tests expect 407 for a dropped
	// bundle's token however soon after egressd's start they send it
	// (the restart tests turn it on).
	s.egArgs = []string{"-audit-fsync", "never", "-proxy-address", "127.0.0.1:0", "-ca-file", s.caFile,
		"-resolve", "api.test:" + port + ":127.0.0.1", "-reregister-grace", "0"}
	s.eg = startPeer(t, "egressd", "egressd", root, s.egArgs...)
	s.sdc, s.egc = secretdapi.NewClient(s.sd.rc), egressdapi.NewClient(s.eg.rc)
	_, err = s.sdc.CredentialPut(context.Background(), &secretdapi.CredentialPutRequest{Name: "api", Value: []byte(egressCanary),
		Destinations: []string{s.origin}, Targets: []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}}}, "")
	is.NoErr(err)
	s.args = append([]string{"-root", root, "-host-runtime-enabled", "yes", "-egress-poll", "100ms"}, supervisordArgs...)
	s.boot()
	t.Cleanup(func() { s.destroyAll(); s.kill(); os.RemoveAll(root) })
	return s
}

// restartEgressd kills egressd and starts a new one (a new epoch).
func (s *egressStack) restartEgressd(t *testing.T) {
	t.Helper()
	s.eg.kill(t)
	s.eg = startPeer(t, "egressd", "egressd", s.root, s.egArgs...)
	s.egc = egressdapi.NewClient(s.eg.rc)
}

// agentEnvFile reads instance id's agent.env.
func (s *egressStack) agentEnvFile(t *testing.T, id string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.root, "state/supervisord/instances", id, "agent.env"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func envValue(envFile, key string) string {
	for _, l := range strings.Split(envFile, "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			return v
		}
	}
	return ""
}

// TestCredentialReachesUpstreamOnlyThroughEgressd guards against a raw
// credential value that reaches the agent (its environment, agent.env, its
// log or its terminal) and against a bundle that outlives destroy: an
// agent runs curl through egressd with only the placeholder, the upstream
// receives the real value, and after destroy the old proxy token is
// refused.
func TestCredentialReachesUpstreamOnlyThroughEgressd(t *testing.T) {
	is := is.New(t)
	s := newEgressStack(t)
	ctx := context.Background()
	script := `echo "env-token=$API_TOKEN"; curl -sS --max-time 20 -H "Authorization: Bearer $API_TOKEN" ` + s.origin +
		`/v1; echo "curl-rc=$?"; exec sleep 1000`
	in, err := s.c.Provision(ctx, &api.ProvisionRequest{Command: []string{"sh", "-c", script}, WorkingDir: "/tmp", PTY: true,
		Start: true, StopTimeoutMS: 1000, Credentials: []api.CredentialSpec{{Credential: "api", Env: "API_TOKEN"}}})
	is.NoErr(err)
	is.True(in.Isolated)
	out := s.waitLog(in.InstanceID, "curl-rc=", 30*time.Second)
	is.True(strings.Contains(out, "upstream-ok")) // curl got the answer
	is.True(strings.Contains(out, "curl-rc=0"))
	is.Equal(s.received(), []string{"Bearer " + egressCanary}) // the upstream got the real value

	envFile := s.agentEnvFile(t, in.InstanceID)
	ph := envValue(envFile, "API_TOKEN")
	is.True(strings.HasPrefix(ph, "hkp_")) // agent.env holds the placeholder
	is.True(strings.Contains(out, "env-token="+ph))
	proxy := envValue(envFile, "HTTPS_PROXY")
	info, err := s.egc.Info(ctx)
	is.NoErr(err)
	u, err := url.Parse(proxy)
	is.NoErr(err)
	tok, _ := u.User.Password()
	is.Equal(u.User.Username(), in.InstanceID)
	is.Equal(len(tok), egressdapi.ProxyTokenLen)
	is.Equal(in.Network, api.NetworkIsolated)  // the default
	is.Equal(u.Host, api.IsolatedProxyAddress) // the holder's bridge, inside the namespace
	u.Host = info.ProxyAddress                 // the same token on egressd's own listener, below
	for _, k := range []string{"http_proxy", "https_proxy", "HTTP_PROXY"} {
		is.Equal(envValue(envFile, k), proxy)
	}
	for _, k := range []string{"SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"} {
		is.Equal(envValue(envFile, k), info.CABundlePath)
	}
	is.Equal(envValue(envFile, "NO_PROXY"), "localhost,127.0.0.1,::1") // isolated: its own loopback
	is.Equal(envValue(envFile, "NODE_USE_ENV_PROXY"), "1")

	// The agent's live environment, the terminal replay, every file of the
	// instance and every daemon's stderr hold no raw value.
	st, err := s.c.Status(ctx, in.InstanceID)
	is.NoErr(err)
	environ, err := os.ReadFile("/proc/" + strconv.FormatInt(st.PID, 10) + "/environ")
	is.NoErr(err)
	is.True(bytes.Contains(environ, []byte("API_TOKEN="+ph+"\x00")))
	a, _, err := s.c.Attach(ctx, &api.AttachRequest{InstanceID: in.InstanceID})
	is.NoErr(err)
	term := readUntil(t, a, "curl-rc=0")
	a.Send(&wire.StreamFrame{T: wire.StreamDetach})
	a.Close()
	is.True(strings.Contains(term, ph))
	dir := filepath.Join(s.root, "state/supervisord/instances", in.InstanceID)
	noCanary := func(what string, b []byte) {
		t.Helper()
		if bytes.Contains(b, []byte(egressCanary)) {
			t.Fatalf("%s holds the raw value", what)
		}
	}
	noCanary("environ", environ)
	noCanary("terminal", []byte(term))
	noCanary("log", []byte(out))
	files, _ := filepath.Glob(dir + "/*")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		noCanary(f, b)
	}
	noCanary("supervisord stderr", []byte(s.cmd.Stderr.(*lockedBuf).String()))
	noCanary("secretd stderr", []byte(s.sd.stderr.String()))
	noCanary("egressd stderr", []byte(s.eg.stderr.String()))

	// Destroy drops the bundle and revokes the leases: the old token is
	// refused and nothing more reaches the upstream.
	is.NoErr(s.c.Destroy(ctx, in.InstanceID))
	stats, err := s.egc.Stats(ctx, "")
	is.NoErr(err)
	for _, inv := range stats.Invocations {
		is.True(inv.Invocation != in.InstanceID)
	}
	leases, err := s.sdc.LeaseList(ctx, in.InstanceID)
	is.NoErr(err)
	is.Equal(len(leases.Leases), 0)
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(info.CABundlePath)
	is.NoErr(err)
	pool.AppendCertsFromPEM(pem)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("GET", s.origin+"/after", nil)
	req.Header.Set("Authorization", "Bearer "+ph)
	resp, err := hc.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a request with the dropped bundle's token got %s", resp.Status)
	}
	is.True(strings.Contains(err.Error(), "Proxy Authentication Required"))
	is.Equal(len(s.received()), 1)
}

// TestEgressAllOrNothing guards against a partly staged instance: a
// second credential that does not exist fails the provision with
// credentials.unavailable (naming secretd's code), revokes the first
// lease, and leaves no instance behind.
func TestEgressAllOrNothing(t *testing.T) {
	is := is.New(t)
	s := newEgressStack(t)
	ctx := context.Background()
	id := api.NewID()
	_, err := s.c.Provision(ctx, &api.ProvisionRequest{InstanceID: id, Command: []string{"sleep", "1000"}, WorkingDir: "/tmp", Start: true,
		Credentials: []api.CredentialSpec{{Credential: "api", Env: "A"}, {Credential: "missing", Env: "B"}}})
	code(t, err, api.CodeCredentialsUnavailable)
	is.True(strings.Contains(err.Error(), secretdapi.CodeCredentialNotFound))
	_, err = s.c.Status(ctx, id)
	code(t, err, api.CodeInstanceNotFound)
	leases, err := s.sdc.LeaseList(ctx, id)
	is.NoErr(err)
	is.Equal(len(leases.Leases), 0)
	is.Equal(len(treeOf(id)), 0)

	// A bad policy origin fails at egressd: the staged lease is revoked.
	_, err = s.c.Provision(ctx, &api.ProvisionRequest{InstanceID: id, Command: []string{"sleep", "1000"}, WorkingDir: "/tmp", Start: true,
		Credentials: []api.CredentialSpec{{Credential: "api", Env: "A"}}, Network: &api.Network{Allow: []string{"ftp://nope"}}})
	code(t, err, api.CodeCredentialsUnavailable)
	is.True(strings.Contains(err.Error(), egressdapi.CodeBundleInvalid))
	leases, err = s.sdc.LeaseList(ctx, id)
	is.NoErr(err)
	is.Equal(len(leases.Leases), 0)

	// Bad credential specs are refused before anything is staged.
	_, err = s.c.Provision(ctx, &api.ProvisionRequest{Command: []string{"true"}, WorkingDir: "/tmp", Start: true,
		Credentials: []api.CredentialSpec{{Credential: "api", Env: "HTTPS_PROXY"}}})
	code(t, err, api.CodeInstanceInvalid)
}

// TestEveryInstanceGetsABundle guards against an instance without
// credentials that bypasses egressd: it gets a bundle and the proxy
// environment; with egressd down it fails closed (-egress-required, the
// default) and health says egressd is unreachable.
func TestEveryInstanceGetsABundle(t *testing.T) {
	is := is.New(t)
	s := newEgressStack(t)
	ctx := context.Background()
	in := s.provision(api.ProvisionRequest{Command: []string{"sleep", "1000"}})
	stats, err := s.egc.Stats(ctx, in.InstanceID)
	is.NoErr(err)
	is.Equal(len(stats.Invocations), 1)
	envFile := s.agentEnvFile(t, in.InstanceID)
	is.True(strings.HasPrefix(envValue(envFile, "HTTPS_PROXY"), "http://"+in.InstanceID+":"))
	_, err = s.c.Stop(ctx, in.InstanceID)
	is.NoErr(err)
	_, err = s.egc.Stats(ctx, in.InstanceID)
	is.True(wire.HasCode(err, egressdapi.CodeBundleUnknown)) // stop dropped it

	s.eg.kill(t)
	_, err = s.c.Provision(ctx, &api.ProvisionRequest{Command: []string{"sleep", "1000"}, WorkingDir: "/tmp", Start: true})
	code(t, err, api.CodeCredentialsUnavailable)
	is.True(strings.Contains(err.Error(), "egress.info: "))
	time.Sleep(300 * time.Millisecond) // a poll or two
	var h map[string]any
	is.NoErr(s.rc.Call(ctx, healthapi.Op, nil, &h))
	is.Equal(h["egressd_reachable"], false)
	is.True(strings.Contains(h["warning"].(string), "EGRESSD UNREACHABLE"))
}

// TestFailedReregistrationMarksCredentialsLost guards against an instance
// that looks healthy after egressd restarted and its bundle could not be
// registered again: with its credential deleted at secretd, the
// credentialed instance is credentials_lost with the reason (status,
// health counts, the log, the audit trail) and nothing stays staged; the
// instance without credentials gets its bundle back and stays running.
func TestFailedReregistrationMarksCredentialsLost(t *testing.T) {
	is := is.New(t)
	s := newEgressStack(t)
	ctx := context.Background()
	cred := s.provision(api.ProvisionRequest{Command: []string{"sleep", "1000"}, Credentials: []api.CredentialSpec{{Credential: "api", Env: "T"}}})
	plain := s.provision(api.ProvisionRequest{Command: []string{"sleep", "1000"}})
	is.Equal(cred.State, api.StateRunning)
	is.NoErr(s.sdc.CredentialDelete(ctx, "api"))
	s.restartEgressd(t)
	s.waitState(cred.InstanceID, api.StateCredsLost, 10*time.Second)
	var st *api.Instance
	waitFor(t, 10*time.Second, func() bool { // the reason, once the re-registration failed
		st, _ = s.c.Status(ctx, cred.InstanceID)
		return st != nil && strings.Contains(st.Warning, "lease.stage api: "+secretdapi.CodeCredentialNotFound)
	})
	is.Equal(st.State, api.StateCredsLost)
	waitFor(t, 10*time.Second, func() bool { _, err := s.egc.Stats(ctx, plain.InstanceID); return err == nil })
	st, err := s.c.Status(ctx, plain.InstanceID)
	is.NoErr(err)
	is.Equal(st.State, api.StateRunning) // re-registered
	is.Equal(st.Warning, "")
	var h struct {
		Instances map[string]int64 `msgpack:"instances"`
	}
	is.NoErr(s.rc.Call(ctx, healthapi.Op, nil, &h))
	is.Equal(h.Instances[api.StateCredsLost], int64(1))
	is.True(strings.Contains(s.cmd.Stderr.(*lockedBuf).String(), "instance.credentials_lost"))
	failed := s.reregisterRecords(t, cred.InstanceID, false)
	is.True(len(failed) > 0)
	is.Equal(failed[0].Code, api.CodeCredentialsUnavailable)
	is.True(strings.Contains(failed[0].Fields["reason"].(string), secretdapi.CodeCredentialNotFound))
	leases, err := s.sdc.LeaseList(ctx, "")
	is.NoErr(err)
	is.Equal(len(leases.Leases), 0) // nothing left staged
	// Stop ends it (the drop at the new egressd finds nothing; no error).
	st, err = s.c.Stop(ctx, cred.InstanceID)
	is.NoErr(err)
	is.Equal(st.State, api.StateStopped)
}

// TestEndedInstanceLosesBundle: an agent that exits on its own loses its
// bundle at egressd within a few sweeps, with nobody asking for its status
// (its proxy token and placeholders then reach nothing); a running
// instance keeps its own over the same sweeps.
func TestEndedInstanceLosesBundle(t *testing.T) {
	is := is.New(t)
	s := newEgressStack(t)
	ctx := context.Background()
	// The first agent ends once the test has seen both bundles (a fixed
	// sleep could end first on a loaded machine).
	gate := agentDir(t, nil)
	ends := s.provision(api.ProvisionRequest{Command: []string{"sh", "-c", "until [ -e " + gate + "/go ]; do sleep 0.05; done"}})
	runs := s.provision(api.ProvisionRequest{Command: []string{"sleep", "1000"}})
	for _, id := range []string{ends.InstanceID, runs.InstanceID} {
		_, err := s.egc.Stats(ctx, id)
		is.NoErr(err) // both registered
	}
	is.NoErr(os.WriteFile(gate+"/go", nil, 0o644))
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.egc.Stats(ctx, ends.InstanceID)
		if wire.HasCode(err, egressdapi.CodeBundleUnknown) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ended instance's bundle is still registered: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // another sweep or two
	_, err := s.egc.Stats(ctx, runs.InstanceID)
	is.NoErr(err) // the running one keeps its bundle
	in, err := s.c.Status(ctx, ends.InstanceID)
	is.NoErr(err)
	is.Equal(in.State, api.StateExited)
	_, err = s.c.Stop(ctx, runs.InstanceID)
	is.NoErr(err)
}

// agentDir makes a directory an agent uid can read, holding files.
func agentDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "hkagent")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
