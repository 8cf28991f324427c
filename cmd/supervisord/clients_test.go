//go:build linux

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/secretdapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// clientScript runs each real client the machine has, once, through
// egressd with only the placeholder, against the upstream at $U; each
// prints "<tool>-rc=<exit code>" after its output, or "<tool>-missing".
const clientScript = `have() { command -v "$1" >/dev/null 2>&1 || { echo "$1-missing"; return 1; }; }
if have curl; then curl -sS --max-time 20 -H "Authorization: Bearer $API_TOKEN" "$U/curl"; echo " curl-rc=$?"; fi
if have wget; then wget -q -O - --timeout=20 --tries=1 --header "Authorization: Bearer $API_TOKEN" "$U/wget"; echo " wget-rc=$?"; fi
if have git; then GIT_TERMINAL_PROMPT=0 git -c http.extraHeader="Authorization: Bearer $API_TOKEN" ls-remote "$U/repo.git"; echo " git-rc=$?"; fi
if have python3; then python3 agent_requests.py; echo " python3-rc=$?"; fi
if have node; then node connect.js; echo " node-rc=$?"; fi
echo clients-done`

// requestsPy uses Python requests as an agent would: the proxy from
// HTTPS_PROXY, the CA bundle from REQUESTS_CA_BUNDLE.
const requestsPy = `import os, requests
r = requests.get(os.environ["U"] + "/python3", headers={"Authorization": "Bearer " + os.environ["API_TOKEN"]}, timeout=20)
print(r.text.strip(), r.status_code)
`

// connectJS is Node 20 without a proxy-aware library: a CONNECT to
// HTTPS_PROXY, then TLS to the upstream, verified against Node's roots
// plus NODE_EXTRA_CA_CERTS (egressd's CA).
const connectJS = `const http = require('http'), tls = require('tls');
const p = new URL(process.env.HTTPS_PROXY), u = new URL(process.env.U + '/node');
const auth = 'Basic ' + Buffer.from(decodeURIComponent(p.username) + ':' + decodeURIComponent(p.password)).toString('base64');
const fail = (m) => { console.log(m); process.exit(1); };
http.request({host: p.hostname, port: p.port, method: 'CONNECT', path: u.host, headers: {'Proxy-Authorization': auth}})
  .on('connect', (res, sock) => {
    if (res.statusCode !== 200) fail('connect ' + res.statusCode);
    const s = tls.connect({socket: sock, servername: u.hostname}, () => {
      s.write('GET ' + u.pathname + ' HTTP/1.1\r\nHost: ' + u.host + '\r\nAuthorization: Bearer ' + process.env.API_TOKEN + '\r\nConnection: close\r\n\r\n');
    });
    let b = '';
    s.on('data', (d) => { b += d; });
    s.on('end', () => { console.log(b.split('\r\n\r\n').slice(1).join('').trim()); });
    s.on('error', (e) => fail('tls ' + e.code));
  })
  .on('error', (e) => fail(e.message)).end();
`

// TestClientConventions guards against a tool that cannot use egressd
// with the variables supervisord writes: curl (proxy variables,
// CURL_CA_BUNDLE), wget (proxy variables, WGETRC's ca_certificate), git
// (proxy variables, GIT_SSL_CAINFO, http.extraHeader), Python requests
// (HTTPS_PROXY, REQUESTS_CA_BUNDLE) and Node (NODE_EXTRA_CA_CERTS, a
// CONNECT to HTTPS_PROXY) each reach the upstream through egressd with the
// placeholder substituted, in an isolated instance (through the bridge)
// and in a host one. Each tool that is installed must pass; the upstream
// must have seen the real value from each, never the placeholder.
func TestClientConventions(t *testing.T) {
	is := is.New(t)
	s := newEgressStack(t)
	ctx := context.Background()
	dir := agentDir(t, map[string]string{"agent_requests.py": requestsPy, "connect.js": connectJS})
	var tools []string
	for _, tool := range []string{"curl", "wget", "git", "python3", "node"} {
		if _, err := exec.LookPath(tool); err == nil && (tool != "python3" || exec.Command("python3", "-c", "import requests").Run() == nil) {
			tools = append(tools, tool)
		}
	}
	t.Logf("clients installed: %v", tools)
	for _, mode := range []string{api.NetworkIsolated, api.NetworkHost} {
		t.Run(mode, func(t *testing.T) {
			is := is.New(t)
			before := len(s.received())
			in, err := s.c.Provision(ctx, &api.ProvisionRequest{Command: []string{"sh", "-c", clientScript}, WorkingDir: dir, Start: true,
				StopTimeoutMS: 1000, Env: map[string]string{"U": s.origin}, Network: &api.Network{Mode: mode},
				Credentials: []api.CredentialSpec{{Credential: "api", Env: "API_TOKEN"}}})
			is.NoErr(err)
			is.Equal(in.Network, mode)
			out := s.waitLog(in.InstanceID, "clients-done", 60*time.Second)
			t.Logf("%s agent:\n%s", mode, out)
			for _, tool := range tools {
				is.True(strings.Contains(out, tool+"-rc=0")) // each installed tool got through
			}
			is.True(strings.Contains(out, gitRef+"\trefs/heads/main"))
			got := s.received()[before:]
			is.True(len(got) >= len(tools)) // git may ask twice
			for _, a := range got {
				is.Equal(a, "Bearer "+egressCanary) // substituted for every tool
			}
			paths := strings.Join(s.paths()[before:], "\n")
			for _, tool := range tools {
				p := "/" + tool
				if tool == "git" {
					p = "/repo.git/info/refs"
				}
				is.True(strings.Contains(paths, p+" Bearer "+egressCanary)) // this tool's own request
			}
			envFile := s.agentEnvFile(t, in.InstanceID)
			noProxy := ""
			if mode == api.NetworkIsolated {
				noProxy = "localhost,127.0.0.1,::1"
			}
			is.Equal(envValue(envFile, "NO_PROXY"), noProxy)
			is.Equal(envValue(envFile, "no_proxy"), noProxy)
			ca := envValue(envFile, "SSL_CERT_FILE")
			for _, k := range []string{"CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "PIP_CERT",
				"AWS_CA_BUNDLE", "CARGO_HTTP_CAINFO", "npm_config_cafile", "DENO_CERT"} {
				is.Equal(envValue(envFile, k), ca)
			}
			// WGETRC: shared, 0644, only the CA line: never the token.
			wgetrc := envValue(envFile, "WGETRC")
			fi, err := os.Stat(wgetrc)
			is.NoErr(err)
			is.Equal(fi.Mode().Perm(), os.FileMode(0o644))
			b, err := os.ReadFile(wgetrc)
			is.NoErr(err)
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				is.True(strings.HasPrefix(line, "#") || line == "ca_certificate = "+ca) // nothing but the CA
			}
			u, err := url.Parse(envValue(envFile, "HTTPS_PROXY"))
			is.NoErr(err)
			tok, _ := u.User.Password()
			is.True(len(tok) > 0 && !strings.Contains(string(b), tok)) // never the proxy token
			is.NoErr(s.c.Destroy(ctx, in.InstanceID))
		})
	}
	is.True(len(tools) > 0)
}

// devScript serves the agent's own dev server on its loopback, then asks
// it and the host's loopback server ($HOSTLO) for a page, plain HTTP.
const devScript = `python3 -m http.server 8765 --bind 127.0.0.1 --directory . >/dev/null 2>&1 & srv=$!
for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:8765/ && break; sleep 0.1; done
echo "own=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' http://localhost:8765/dev.txt)"
echo "ownpy=$(python3 -c 'import requests; print(requests.get("http://127.0.0.1:8765/dev.txt", timeout=10).text.strip())')"
echo "hostlo=$(curl -sS --max-time 10 -D - "$HOSTLO/" 2>&1 | tr -d '\r' | tr '\n' ' ')"
kill $srv
echo dev-done`

// TestNoProxyReachesOwnLoopbackOnly guards against an agent that reaches
// the host's loopback services, and against one that cannot reach its own
// dev server: in network isolated, NO_PROXY sends localhost to the
// namespace's own loopback (curl and Python requests reach the agent's
// server; the host's loopback server is not reached); in network host,
// NO_PROXY is empty, so the host's loopback goes to egressd, which refuses
// it.
func TestNoProxyReachesOwnLoopbackOnly(t *testing.T) {
	for _, tool := range []string{"curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("needs %s (scripts/setup installs it)", tool)
		}
	}
	if exec.Command("python3", "-c", "import requests").Run() != nil {
		t.Fatal("needs Python requests (scripts/setup installs python3-requests)")
	}
	is := is.New(t)
	s := newEgressStack(t)
	ctx := context.Background()
	hostLo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "HOST-LOOPBACK-REACHED") }))
	defer hostLo.Close()
	dir := agentDir(t, map[string]string{"dev.txt": "own-dev-server\n"})
	for _, tc := range []struct {
		mode  string
		check func(is *isT, out string)
	}{
		{api.NetworkIsolated, func(is *isT, out string) {
			is.True(strings.Contains(out, "own=200"))
			is.True(strings.Contains(out, "ownpy=own-dev-server"))
		}},
		{api.NetworkHost, func(is *isT, out string) {
			is.True(strings.Contains(out, "own=403"))             // NO_PROXY is empty: loopback goes to egressd, which refuses it
			is.True(strings.Contains(out, "hostlo=HTTP/1.1 403")) // egressd's refusal, not the server
		}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			is := is.New(t)
			in, err := s.c.Provision(ctx, &api.ProvisionRequest{Command: []string{"sh", "-c", devScript}, WorkingDir: dir, Start: true,
				StopTimeoutMS: 1000, Env: map[string]string{"HOSTLO": hostLo.URL}, Network: &api.Network{Mode: tc.mode}})
			is.NoErr(err)
			out := s.waitLog(in.InstanceID, "dev-done", 60*time.Second)
			t.Logf("%s agent:\n%s", tc.mode, out)
			is.True(!strings.Contains(out, "HOST-LOOPBACK-REACHED")) // never the host's loopback
			tc.check(is, out)
			is.NoErr(s.c.Destroy(ctx, in.InstanceID))
		})
	}
}

// TestLoopbackCredentialRefusedWhenIsolated guards against a placeholder
// meant for a loopback server that an isolated agent cannot see: a
// credential whose destination is a literal-loopback origin is refused at
// provision for an isolated instance (instance.invalid naming it, named
// in the request or chosen by the credential; nothing staged is left),
// and accepted for a host instance.
func TestLoopbackCredentialRefusedWhenIsolated(t *testing.T) {
	is := is.New(t)
	s := newEgressStack(t)
	ctx := context.Background()
	for _, c := range []struct{ name, dest string }{{"lo4", "https://127.0.0.1:8443"}, {"lo6", "http://[::1]:3000"}, {"lohost", "https://localhost:9000"}} {
		_, err := s.sdc.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: c.name, Value: []byte(egressCanary + c.name),
			Destinations: []string{c.dest}, Targets: []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}}}, "")
		is.NoErr(err)
	}
	for _, tc := range []struct {
		name string
		cred api.CredentialSpec
	}{
		{"named v4", api.CredentialSpec{Credential: "lo4", Env: "T", Destination: "https://127.0.0.1:8443"}},
		{"chosen v4", api.CredentialSpec{Credential: "lo4", Env: "T"}},
		{"chosen v6", api.CredentialSpec{Credential: "lo6", Env: "T"}},
		{"chosen localhost", api.CredentialSpec{Credential: "lohost", Env: "T"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			id := api.NewID()
			_, err := s.c.Provision(ctx, &api.ProvisionRequest{InstanceID: id, Command: []string{"sleep", "1000"}, WorkingDir: "/tmp", Start: true,
				Credentials: []api.CredentialSpec{tc.cred}})
			code(t, err, api.CodeInstanceInvalid)
			is.True(strings.Contains(err.Error(), tc.cred.Credential))
			is.True(strings.Contains(err.Error(), "literal-loopback"))
			_, err = s.c.Status(ctx, id)
			code(t, err, api.CodeInstanceNotFound)
			leases, err := s.sdc.LeaseList(ctx, id)
			is.NoErr(err)
			is.Equal(len(leases.Leases), 0) // a staged lease was revoked
		})
	}
	in, err := s.c.Provision(ctx, &api.ProvisionRequest{Command: []string{"sleep", "1000"}, WorkingDir: "/tmp", Start: true,
		Network: &api.Network{Mode: api.NetworkHost}, Credentials: []api.CredentialSpec{{Credential: "lo4", Env: "T"}}})
	is.NoErr(err) // the host's loopback is the host instance's own
	is.Equal(wire.CodeOf(s.c.Destroy(ctx, in.InstanceID)), "")
}

// isT is the is package's checker type, for table checks.
type isT = is.I
