//go:build linux

package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
)

// recorder is a test upstream that records what reaches it.
type recorder struct {
	mu   sync.Mutex
	reqs []string // "METHOD target auth=<Authorization>"
}

func (r *recorder) add(req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req.Method+" "+req.URL.RequestURI()+" auth="+req.Header.Get("Authorization"))
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reqs...)
}

// proxyFixture is secretd + egressd with three upstreams: api.test (HTTPS,
// the credential's destination; it reflects Authorization plain and
// base64), other.test (HTTPS, allowed by policy; serves a large body at
// /big) and a plain HTTP server on 127.0.0.1 (allowed).
type proxyFixture struct {
	eg                *egressd
	info              *egressdapi.InfoResponse
	ca                *egresstest.CA
	api, other, plain *recorder
	apiURL, otherURL  string
	plainURL          string
	ph, ph2           string // placeholders of inv-1 and inv-2
	tok1, tok2, tok3  string
	kept              atomic.Value // api.test's /adv/keep: the last value it was sent
}

const bigSize = 1 << 20

func newProxyFixture(t *testing.T) *proxyFixture {
	t.Helper()
	is := is.New(t)
	root := newRoot(t)
	f := &proxyFixture{ca: egresstest.NewCA(t), api: &recorder{}, other: &recorder{}, plain: &recorder{},
		tok1: strings.Repeat("a", 43), tok2: strings.Repeat("b", 43), tok3: strings.Repeat("c", 43)}
	apiSrv := f.ca.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.api.add(r)
		v := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch r.URL.Path {
		case "/adv/keep": // a store: keeps the value, to show anyone later
			f.kept.Store(v)
			return
		case "/adv/show": // no credential needed to read it back
			kept, _ := f.kept.Load().(string)
			io.WriteString(w, `{"kept":"`+kept+`"}`)
			return
		}
		if advEcho(w, r, v) {
			return
		}
		io.WriteString(w, "echo "+v+" "+base64.StdEncoding.EncodeToString([]byte(v)))
	}), "api.test")
	otherSrv := f.ca.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.other.add(r)
		if r.URL.Path == "/range" { // Range support, for requests that keep theirs
			http.ServeContent(w, r, "", time.Time{}, strings.NewReader("0123456789abcdef"))
			return
		}
		if r.URL.Path == "/big" {
			w.Write(make([]byte, bigSize))
			return
		}
		io.WriteString(w, "other ok")
	}), "other.test")
	plainL, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	plainSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.plain.add(r)
		io.WriteString(w, "plain ok")
	})}
	go plainSrv.Serve(plainL)
	t.Cleanup(func() { plainSrv.Close() })
	port := func(a net.Addr) string { return strconv.Itoa(a.(*net.TCPAddr).Port) }
	pa, po, pp := port(apiSrv.Listener.Addr()), port(otherSrv.Listener.Addr()), port(plainL.Addr())
	f.apiURL, f.otherURL, f.plainURL = "https://api.test:"+pa, "https://other.test:"+po, "http://127.0.0.1:"+pp

	sd := startSecretd(t, root)
	f.eg = startEgressd(t, root, "-ca-file", f.ca.WriteFile(t, root), "-resolve", "api.test:"+pa+":127.0.0.1",
		"-resolve", "other.test:"+po+":127.0.0.1")
	f.info, err = f.eg.api.Info(ctx)
	is.NoErr(err)
	for name, val := range map[string]string{"api": canary, "api-b": canary + "-b"} {
		_, err = sd.api.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: name, Value: []byte(val),
			Destinations: []string{f.apiURL}, Targets: []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}}}, "")
		is.NoErr(err)
	}
	allow := egressdapi.Policy{Allow: []egressdapi.AllowRule{{Origin: f.otherURL}, {Origin: f.plainURL},
		{Origin: "https://" + f.info.ProxyAddress}}}
	register := func(inv, cred, tok string) string {
		req := &egressdapi.BundleRegisterRequest{Invocation: inv, ProxyToken: tok, Policy: allow}
		ph := ""
		if cred != "" {
			st, err := sd.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: cred, Invocation: inv})
			is.NoErr(err)
			req.Handles, ph = [][]byte{st.Handle}, st.Placeholder
		}
		_, err := f.eg.api.BundleRegister(ctx, req)
		is.NoErr(err)
		return ph
	}
	f.ph = register("inv-1", "api", f.tok1)
	f.ph2 = register("inv-2", "api-b", f.tok2)
	register("inv-3", "", f.tok3) // no credentials: opaque tunnels
	return f
}

// proxyURL is http://inv:tok@<egressd proxy address>.
func (f *proxyFixture) proxyURL(inv, tok string) string {
	return "http://" + inv + ":" + tok + "@" + f.info.ProxyAddress
}

// bundlePool is egressd's public CA bundle as a pool.
func (f *proxyFixture) bundlePool(t *testing.T) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(f.info.CABundlePath)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return pool
}

// client is a Go net/http client through egressd as inv.
func (f *proxyFixture) client(inv, tok string, roots *x509.CertPool) *http.Client {
	u, _ := url.Parse(f.proxyURL(inv, tok))
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: roots}}}
}

// curl runs /usr/bin/curl -sS -v through egressd with the agent's
// environment and returns its combined output.
func (f *proxyFixture) curl(t *testing.T, inv, tok string, args ...string) string {
	t.Helper()
	const bin = "/usr/bin/curl"
	if _, err := os.Stat(bin); err != nil {
		t.Fatal("needs " + bin + " (scripts/setup installs it)")
	}
	cmd := exec.Command(bin, append([]string{"-sS", "-v", "--max-time", "20"}, args...)...)
	cmd.Env = f.agentEnv(inv, tok)
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// agentEnv is the environment supervisord gives an agent (docs/design.md,
// "A credentialed agent run", step 5).
func (f *proxyFixture) agentEnv(inv, tok string) []string {
	p := f.proxyURL(inv, tok)
	return []string{"PATH=/usr/bin:/bin", "http_proxy=" + p, "https_proxy=" + p, "HTTP_PROXY=" + p, "HTTPS_PROXY=" + p,
		"NO_PROXY=", "no_proxy=", "SSL_CERT_FILE=" + f.info.CABundlePath, "CURL_CA_BUNDLE=" + f.info.CABundlePath,
		"REQUESTS_CA_BUNDLE=" + f.info.CABundlePath, "HOME=/tmp"}
}
