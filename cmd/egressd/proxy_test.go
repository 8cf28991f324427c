//go:build linux

package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/lib/redact"
)

// TestProxyCurlSubstitution is the main flow with a real client: curl
// through https_proxy=http://inv:token@egressd, Authorization: Bearer
// <placeholder> to an HTTPS server that reflects it. The server receives
// the real value; curl's verbose transcript holds only the placeholder and
// no echo of the value.
func TestProxyCurlSubstitution(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newProxyFixture(t)
	out := f.curl(t, "inv-1", f.tok1, "-H", "Authorization: Bearer "+f.ph, f.apiURL+"/v1/me")
	is.True(strings.Contains(out, "echo "+redact.Redacted+" "+redact.Redacted)) // reflected plain and base64, scrubbed
	is.True(strings.Contains(out, "Bearer "+f.ph))
	is.True(strings.Contains(out, "hostkit egressd local CA")) // intercepted: egressd's leaf
	is.Equal(f.api.all(), []string{"GET /v1/me auth=Bearer " + canary})
	f.checkCanary(t, out)
}

// TestProxyPythonRequests does the same with /usr/bin/python3 requests.
func TestProxyPythonRequests(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import requests").Run(); err != nil {
		t.Fatal("needs /usr/bin/python3 with requests (scripts/setup installs python3-requests)")
	}
	f := newProxyFixture(t)
	script := `import os, requests
r = requests.get(os.environ["URL"], headers={"Authorization": "Bearer " + os.environ["PH"]}, timeout=20)
print(r.status_code, r.text)`
	cmd := exec.Command(py, "-c", script)
	cmd.Env = append(f.agentEnv("inv-1", f.tok1), "URL="+f.apiURL+"/py", "PH="+f.ph)
	out, err := cmd.CombinedOutput()
	is.NoErr(err)
	is.Equal(strings.TrimSpace(string(out)), "200 echo "+redact.Redacted+" "+redact.Redacted)
	is.Equal(f.api.all(), []string{"GET /py auth=Bearer " + canary})
	f.checkCanary(t, string(out))
}

// TestProxyGoClient does the same with Go's net/http (http.ProxyURL, as
// ProxyFromEnvironment would build) and checks the leaf's issuer, and
// the Unix socket listener.
func TestProxyGoClient(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newProxyFixture(t)
	c := f.client("inv-1", f.tok1, f.bundlePool(t))
	req, _ := http.NewRequest("GET", f.apiURL+"/go", nil)
	req.Header.Set("Authorization", "Bearer "+f.ph)
	resp, err := c.Do(req)
	is.NoErr(err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	is.Equal(resp.StatusCode, 200)
	is.Equal(string(body), "echo "+redact.Redacted+" "+redact.Redacted)
	is.Equal(resp.TLS.PeerCertificates[0].Issuer.CommonName, "hostkit egressd local CA")
	is.Equal(f.api.all(), []string{"GET /go auth=Bearer " + canary})
	f.checkCanary(t, string(body))

	// The same proxy protocol on <run>/egressd/proxy.sock, 0600.
	fi, err := os.Stat(f.info.ProxySocket)
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o600))
	resp = f.rawProxy(t, f.dialUnix, "GET "+f.plainURL+"/unix HTTP/1.1\r\nHost: "+strings.TrimPrefix(f.plainURL, "http://")+
		"\r\nProxy-Authorization: "+basic("inv-3", f.tok3)+"\r\n\r\n")
	is.Equal(resp.StatusCode, 200)
	is.Equal(f.plain.all(), []string{"GET /unix auth="})

	// Files: bundle 0644 in a 0755 public dir; the CA key 0600 in state.
	for path, mode := range map[string]os.FileMode{f.info.CABundlePath: 0o644, filepath.Dir(f.info.CABundlePath): 0o755,
		filepath.Join(f.eg.root, "state", "egressd", "proxy-ca.key"): 0o600} {
		fi, err := os.Stat(path)
		is.NoErr(err)
		is.Equal(fi.Mode().Perm(), mode)
	}
}

// TestProxyPlaceholderMisuse: the placeholder to a second allowed HTTPS
// server, at another position, in plaintext, another invocation's
// placeholder, and the placeholder under another invocation's token are
// each refused with egress.placeholder_misuse and audited; nothing
// reaches the servers.
func TestProxyPlaceholderMisuse(t *testing.T) {
	t.Parallel()
	f := newProxyFixture(t)
	for _, tc := range []struct {
		name, inv, tok string
		args           []string
	}{
		{"other host", "inv-1", f.tok1, []string{"-H", "Authorization: Bearer " + f.ph, f.otherURL + "/x"}},
		{"other position", "inv-1", f.tok1, []string{f.apiURL + "/x?key=" + f.ph}},
		{"other header", "inv-1", f.tok1, []string{"-H", "X-Token: " + f.ph, f.apiURL + "/x"}},
		{"plaintext", "inv-1", f.tok1, []string{"-H", "Authorization: Bearer " + f.ph, strings.Replace(f.apiURL, "https:", "http:", 1) + "/x"}},
		{"plaintext loopback", "inv-1", f.tok1, []string{"-H", "Authorization: Bearer " + f.ph, f.plainURL + "/x"}},
		{"body", "inv-1", f.tok1, []string{"--data", `{"k":"` + f.ph + `"}`, f.apiURL + "/x"}},
		{"another invocation's placeholder", "inv-1", f.tok1, []string{"-H", "Authorization: Bearer " + f.ph2, f.apiURL + "/x"}},
		{"another invocation's token", "inv-2", f.tok2, []string{"-H", "Authorization: Bearer " + f.ph, f.apiURL + "/x"}},
		{"no credentials, opaque-less plain", "inv-3", f.tok3, []string{"-H", "Authorization: Bearer " + f.ph, f.plainURL + "/x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			out := f.curl(t, tc.inv, tc.tok, tc.args...)
			// HTTP/1.1 on the proxy face; HTTP/2 inside a tunnel, which
			// curl offers in ALPN.
			is.True(strings.Contains(out, "< HTTP/1.1 403") || strings.Contains(out, "< HTTP/2 403"))
			is.True(strings.Contains(strings.ToLower(out), "x-hostkit-error: egress.placeholder_misuse"))
			f.checkCanary(t, out)
		})
	}
	is := is.New(t)
	is.Equal(len(f.api.all()), 0)
	is.Equal(len(f.other.all()), 0)
	is.Equal(len(f.plain.all()), 0)
	is.True(strings.Count(f.eg.auditLog(t), `"code":"egress.placeholder_misuse"`) >= 9)
	f.checkCanary(t, "")
}

// checkCanary scans extra and every egressd output for the raw values.
func (f *proxyFixture) checkCanary(t *testing.T, extra string) {
	t.Helper()
	probe := redact.NewScrubber()
	probe.Register([]byte(canary))
	probe.Register([]byte(canary + "-b"))
	for what, s := range map[string]string{"client output": extra, "egressd log": f.eg.stderr.String(), "audit": f.eg.auditLog(t)} {
		if probe.Contains([]byte(s)) || probe.ContainsDecoded([]byte(s)) || probe.ContainsInHost(s) {
			t.Errorf("canary in %s", what)
		}
	}
}

// TestProxyHeadNoLength: an answer to HEAD that egressd writes (plain HTTP,
// or inside an intercepted tunnel) carries no Content-Length (it would
// have to equal what GET returns after decoding and scrubbing, RFC 9110
// section 8.6), where it used to say 0; GET keeps its length. An opaque
// tunnel passes the upstream's own answer, length included.
func TestProxyHeadNoLength(t *testing.T) {
	t.Parallel()
	f := newProxyFixture(t)
	for _, tc := range []struct {
		name, inv, tok, url string
		want                string // HEAD's Content-Length
	}{
		{"plain", "inv-3", f.tok3, f.plainURL + "/h", ""},
		{"intercepted", "inv-1", f.tok1, f.otherURL + "/h", ""},
		{"opaque", "inv-3", f.tok3, f.otherURL + "/h", "8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			c := f.client(tc.inv, tc.tok, f.bundlePool(t))
			resp, err := c.Head(tc.url)
			is.NoErr(err)
			resp.Body.Close()
			is.Equal(resp.StatusCode, 200)
			is.Equal(resp.Header.Get("Content-Length"), tc.want)
			resp, err = c.Get(tc.url)
			is.NoErr(err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			is.NoErr(err)
			is.Equal(len(body), 8) // "other ok", "plain ok"
			if tc.want == "" {
				is.Equal(resp.ContentLength, int64(-1)) // streamed through the pipeline: chunked
			} else {
				is.Equal(resp.ContentLength, int64(8))
			}
		})
	}
}

// TestProxyChunkedClosesConnection: a request with Transfer-Encoding is
// read as chunked and answered once, then the connection is closed (RFC
// 9112 section 6.3); one with a Content-Length beside it (a smuggling
// shape), or an HTTP/1.0 one with Transfer-Encoding (whose framing is
// faulty, section 6.1), is refused with 400 and closed, never
// forwarded; a request framed by Content-Length alone keeps the
// connection open.
func TestProxyChunkedClosesConnection(t *testing.T) {
	t.Parallel()
	f := newProxyFixture(t)
	auth := basic("inv-3", f.tok3)
	host := strings.TrimPrefix(f.plainURL, "http://")
	for _, tc := range []struct {
		name, framing, body string
		status              int
		keepOpen            bool
	}{
		{"content-length and chunked", "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", "3\r\nabc\r\n0\r\n\r\n", 400, false},
		{"chunked", "Transfer-Encoding: chunked\r\n", "3\r\nabc\r\n0\r\n\r\n", 200, false},
		{"content-length", "Content-Length: 3\r\n", "abc", 200, true},
		{"HTTP/1.0 keep-alive with both", "Connection: keep-alive\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n", "abc", 400, false},
		{"HTTP/1.0 with chunked", "Transfer-Encoding: chunked\r\n", "3\r\nabc\r\n0\r\n\r\n", 400, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			c, br := dialProxy(t, f.info.ProxyAddress)
			proto := "HTTP/1.1"
			if strings.HasPrefix(tc.name, "HTTP/1.0") {
				proto = "HTTP/1.0" // net/http ignores Transfer-Encoding there and reads by Content-Length
			}
			req := "POST " + f.plainURL + "/p " + proto + "\r\nHost: " + host + "\r\nProxy-Authorization: " + auth + "\r\n" + tc.framing + "\r\n" + tc.body
			_, err := io.WriteString(c, req+"GET "+f.plainURL+"/second HTTP/1.1\r\nHost: "+host+"\r\nProxy-Authorization: "+auth+"\r\n\r\n")
			is.NoErr(err)
			resp, err := http.ReadResponse(br, nil)
			is.NoErr(err)
			io.Copy(io.Discard, resp.Body)
			is.Equal(resp.StatusCode, tc.status)
			if tc.status == 400 {
				is.Equal(code(resp), "egress.header_invalid")
			}
			is.Equal(resp.Close, !tc.keepOpen)
			second, err := http.ReadResponse(br, nil)
			if tc.keepOpen {
				is.NoErr(err)
				is.Equal(second.StatusCode, 200) // the pipelined request was served
			} else {
				is.True(err != nil) // closed: the bytes after the body were never read as a request
			}
		})
	}
}
