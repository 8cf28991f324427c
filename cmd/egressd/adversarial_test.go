//go:build linux

package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// advEcho is the api.test upstream's adversarial echoes of the value it
// received (paths under /adv/): a destination that reflects what it got in
// forms a naive scrubber misses. It reports whether it answered.
func advEcho(w http.ResponseWriter, r *http.Request, v string) bool {
	switch r.URL.Path {
	case "/adv/gz2": // gzip body announced by the second of two Content-Encoding lines
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		io.WriteString(zw, "echo "+v)
		zw.Close()
		w.Header()["Content-Encoding"] = []string{"identity", "gzip"}
		w.Write(buf.Bytes())
	case "/adv/hname": // the value as a response header name
		w.Header().Set("X-Echo-"+v, "1")
		io.WriteString(w, "ok")
	default:
		return false
	}
	return true
}

// TestAdversarialEchoTwoContentEncodings: an upstream that sends
// "Content-Encoding: identity" and "Content-Encoding: gzip" must not get a
// compressed echo of the raw value past the scrubber (egressd strips
// Content-Encoding, so the client would receive gzip bytes it can inflate).
func TestAdversarialEchoTwoContentEncodings(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newProxyFixture(t)
	c := f.client("inv-1", f.tok1, f.bundlePool(t))
	c.Transport.(*http.Transport).DisableCompression = true
	req, _ := http.NewRequest("GET", f.apiURL+"/adv/gz2", nil)
	req.Header.Set("Authorization", "Bearer "+f.ph)
	resp, err := c.Do(req)
	is.NoErr(err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	is.Equal(f.api.all(), []string{"GET /adv/gz2 auth=Bearer " + canary}) // substituted
	plain := body
	if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
		plain, _ = io.ReadAll(zr)
	}
	if strings.Contains(string(plain), canary) {
		t.Fatalf("raw value reached the client through a gzip body: status %d", resp.StatusCode)
	}
	f.checkCanary(t, string(plain))
}

// TestAdversarialEchoHeaderName: the raw value as a response header name
// must not reach the client.
func TestAdversarialEchoHeaderName(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newProxyFixture(t)
	req, _ := http.NewRequest("GET", f.apiURL+"/adv/hname", nil)
	req.Header.Set("Authorization", "Bearer "+f.ph)
	resp, err := f.client("inv-1", f.tok1, f.bundlePool(t)).Do(req)
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(len(f.api.all()), 1)
	var names strings.Builder
	for k := range resp.Header {
		names.WriteString(k + "\n")
	}
	if strings.Contains(strings.ToLower(names.String()), strings.ToLower(canary)) {
		t.Fatalf("raw value reached the client as a header name")
	}
	f.checkCanary(t, names.String())
}

// TestAdversarialTunnelShapes sends the placeholder toward the wrong place
// inside intercepted tunnels, as raw HTTP/1.x: every one is refused and
// nothing reaches other.test carrying it.
func TestAdversarialTunnelShapes(t *testing.T) {
	t.Parallel()
	f := newProxyFixture(t)
	api := strings.TrimPrefix(f.apiURL, "https://")
	other := strings.TrimPrefix(f.otherURL, "https://")
	ph := f.ph
	for _, tc := range []struct {
		name, authority, raw string
		want                 []int
	}{
		{"cookie", other, "GET / HTTP/1.1\r\nHost: " + other + "\r\nCookie: s=" + ph + "\r\n\r\n", []int{403}},
		{"proxy-authorization inside", other, "GET / HTTP/1.1\r\nHost: " + other + "\r\nProxy-Authorization: Bearer " + ph + "\r\n\r\n", []int{200, 403}}, // proxy headers are stripped, never forwarded
		{"query", other, "GET /?k=" + ph + " HTTP/1.1\r\nHost: " + other + "\r\n\r\n", []int{403}},
		{"percent path", other, "GET /%68%6bp_" + ph[4:] + " HTTP/1.1\r\nHost: " + other + "\r\n\r\n", []int{403}},
		{"double percent", other, "GET /x?a=%2568kp_" + ph[4:] + " HTTP/1.1\r\nHost: " + other + "\r\n\r\n", []int{403}},
		{"form body", other, "POST / HTTP/1.1\r\nHost: " + other + "\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: " + itoa(len("t="+ph)) + "\r\n\r\nt=" + ph, []int{403}},
		{"chunked body", other, "POST / HTTP/1.1\r\nHost: " + other + "\r\nTransfer-Encoding: chunked\r\n\r\n" + hex(len(ph)) + "\r\n" + ph + "\r\n0\r\n\r\n", []int{403}},
		{"multipart", other, "POST / HTTP/1.1\r\nHost: " + other + "\r\nContent-Type: multipart/form-data; boundary=B\r\nContent-Length: " + itoa(len(mp(ph))) + "\r\n\r\n" + mp(ph), []int{403}},
		{"http/1.0 no host", other, "GET / HTTP/1.0\r\nAuthorization: Bearer " + ph + "\r\n\r\n", []int{403}},
		{"header name", other, "GET / HTTP/1.1\r\nHost: " + other + "\r\nX-" + ph + ": 1\r\n\r\n", []int{403}},
		{"host header to other in api tunnel", api, "GET / HTTP/1.1\r\nHost: " + other + "\r\nAuthorization: Bearer " + ph + "\r\n\r\n", []int{421}},
		{"absolute-form other in api tunnel", api, "GET " + f.otherURL + "/ HTTP/1.1\r\nHost: " + api + "\r\nAuthorization: Bearer " + ph + "\r\n\r\n", []int{421}},
		{"absolute-form http in api tunnel", api, "GET http://" + api + "/ HTTP/1.1\r\nHost: " + api + "\r\nAuthorization: Bearer " + ph + "\r\n\r\n", []int{421}},
		{"second copy", api, "GET /?x=" + ph + " HTTP/1.1\r\nHost: " + api + "\r\nAuthorization: Bearer " + ph + "\r\n\r\n", []int{403}},
		{"two authorization lines", api, "GET / HTTP/1.1\r\nHost: " + api + "\r\nAuthorization: Bearer " + ph + "\r\nAuthorization: Bearer " + ph + "\r\n\r\n", []int{403}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tcn, br := f.connectTLS(t, "inv-1", f.tok1, tc.authority)
			if _, err := io.WriteString(tcn, tc.raw); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			ok := false
			for _, w := range tc.want {
				ok = ok || resp.StatusCode == w
			}
			if !ok {
				t.Errorf("status %d (%s), want %v", resp.StatusCode, code(resp), tc.want)
			}
		})
	}
	// Pipelined: a good request to api.test then one naming other.test in
	// the same tunnel.
	t.Run("pipelined", func(t *testing.T) {
		tcn, br := f.connectTLS(t, "inv-1", f.tok1, api)
		io.WriteString(tcn, "GET /p1 HTTP/1.1\r\nHost: "+api+"\r\nAuthorization: Bearer "+ph+"\r\n\r\n"+
			"GET /p2 HTTP/1.1\r\nHost: "+other+"\r\nAuthorization: Bearer "+ph+"\r\n\r\n")
		r1, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, r1.Body)
		r2, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r1.StatusCode != 200 || r2.StatusCode != 421 {
			t.Errorf("statuses %d %d", r1.StatusCode, r2.StatusCode)
		}
	})
	for _, r := range f.other.all() {
		if strings.Contains(r, ph) || strings.Contains(r, canary) {
			t.Errorf("other.test received %q", r)
		}
	}
	f.checkCanary(t, "")
}

func itoa(n int) string { return strconv.Itoa(n) }
func hex(n int) string  { return strconv.FormatInt(int64(n), 16) }
func mp(ph string) string {
	return "--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a\"\r\n\r\n" + ph + "\r\n--B--\r\n"
}
