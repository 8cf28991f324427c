//go:build linux

package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// Adversarial tests of what landed today: HTTP Basic substitution,
// streamed request bodies, the tail rule. These are attacks egressd
// refuses; those that found a defect live in adv_today_fail_test.go
// (build tag advfail).

// rawTunnel opens an intercepted tunnel to base's authority as inv-g,
// writes raw (one or more requests, HTTP/1.1) in it and reads one
// answer, whose body it returns whole (kept for the fixture's canary
// scan).
func (f *basicFixture) rawTunnel(t *testing.T, base, raw string) (*http.Response, string) {
	t.Helper()
	host := strings.TrimPrefix(base, "https://")
	c, err := net.Dial("tcp", f.info.ProxyAddress)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "CONNECT "+host+" HTTP/1.1\r\nHost: "+host+"\r\nProxy-Authorization: "+basic("inv-g", f.tok)+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	pem, err := os.ReadFile(f.info.CABundlePath)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tc := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: strings.Split(host, ":")[0], NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(tc, raw)
	resp, err = http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatalf("answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	f.mu.Lock()
	f.outputs = append(f.outputs, string(b))
	f.mu.Unlock()
	return resp, string(b)
}

// seenAt returns what path's requests brought to s.
func (s *basicServer) seenAt(path string) []basicSeen {
	var out []basicSeen
	for _, r := range s.all() {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// TestAdvTodayBasicShapes: Authorization values that bend RFC 7617 and
// RFC 9110 field syntax. A canonical credential in any scheme case and
// with several spaces is placed; every other shape that holds the
// placeholder (a tab after the scheme, a comma-joined second credential,
// two fields, obs-fold, the placeholder in the user half next to another
// placeholder in the password half, a Basic value in another header,
// Proxy-Authorization inside the tunnel) never reaches the git server with the password, and
// a request in a tunnel to other.test that names git.test (Host,
// absolute form) never gets the password placed.
func TestAdvTodayBasicShapes(t *testing.T) {
	t.Parallel()
	f := newBasicFixture(t)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	gitHost := strings.TrimPrefix(f.gitURL, "https://")
	for i, tc := range []struct {
		name   string
		base   string // the tunnel's authority
		fields string // the request's fields after Host (CRLF each)
		target string // the request target ("" is /p<i>)
		host   string // the Host field ("" is the tunnel's)
		placed bool   // the git server gets the real password
	}{
		{name: "scheme case", base: f.gitURL, fields: "Authorization: bAsIc " + b64("alice:"+f.ph) + "\r\n", placed: true},
		{name: "many spaces", base: f.gitURL, fields: "Authorization: Basic    " + b64("alice:"+f.ph) + "\r\n", placed: true},
		{name: "tab after scheme", base: f.gitURL, fields: "Authorization: Basic\t" + b64("alice:"+f.ph) + "\r\n"},
		{name: "comma-joined", base: f.gitURL, fields: "Authorization: Basic " + b64("alice:"+f.ph) + ", Basic " + b64("bob:x") + "\r\n"},
		{name: "two fields", base: f.gitURL, fields: "Authorization: Basic " + b64("alice:"+f.ph) + "\r\nAuthorization: Basic " + b64("bob:x") + "\r\n"},
		{name: "two fields, same", base: f.gitURL, fields: strings.Repeat("Authorization: Basic "+b64("alice:"+f.ph)+"\r\n", 2)},
		{name: "obs-fold", base: f.gitURL, fields: "Authorization: Basic\r\n " + b64("alice:"+f.ph) + "\r\n"},
		{name: "user and password placeholders", base: f.gitURL, fields: "Authorization: Basic " + b64(f.ph+":"+f.phFixed) + "\r\n"},
		{name: "placeholder as user, fixed", base: f.gitURL, fields: "Authorization: Basic " + b64(f.phFixed+":x") + "\r\n"},
		{name: "other header", base: f.gitURL, fields: "X-Auth: Basic " + b64("alice:"+f.ph) + "\r\n"},
		{name: "proxy-authorization in tunnel", base: f.gitURL, fields: "Proxy-Authorization: bAsIc\t" + b64("alice:"+f.ph) + "\r\n"},
		{name: "Host names the destination", base: f.otherURL, host: gitHost, fields: "Authorization: Basic " + b64("alice:"+f.ph) + "\r\n"},
		{name: "absolute form names the destination", base: f.otherURL, target: f.gitURL + "/abs", fields: "Authorization: Basic " + b64("alice:"+f.ph) + "\r\n"},
		{name: "other host, scheme case", base: f.otherURL, fields: "Authorization: BASIC " + b64("alice:"+f.ph) + "\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			target := tc.target
			if target == "" {
				target = "/p" + strconv.Itoa(i)
			}
			host := tc.host
			if host == "" {
				host = strings.TrimPrefix(tc.base, "https://")
			}
			resp, body := f.rawTunnel(t, tc.base, "GET "+target+" HTTP/1.1\r\nHost: "+host+"\r\n"+tc.fields+"Connection: close\r\n\r\n")
			t.Logf("%d %s %q", resp.StatusCode, resp.Header.Get("X-Hostkit-Error"), body)
			var placed int
			for _, s := range append(f.git.all(), f.other.all()...) {
				if s.pass == gitPass {
					placed++
				}
			}
			if tc.placed {
				is.Equal(resp.StatusCode, 200)
				is.True(strings.HasPrefix(body, "ok user=alice"))
				return
			}
			is.True(resp.StatusCode >= 400 && resp.StatusCode != 401) // refused by egressd, never the server's 401
			for _, s := range f.other.all() {
				is.True(s.pass != gitPass) // the password at another host
			}
		})
	}
}
