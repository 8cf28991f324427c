//go:build linux

package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"html"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/redact"
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
	case "/adv/range": // a stored document holding the value, served with Range support
		w.Header().Set("X-Saw-Range", r.Header.Get("Range")+"|"+r.Header.Get("If-Range"))
		http.ServeContent(w, r, "", time.Time{}, strings.NewReader(`{"token":"`+v+`"}`))
	case "/adv/206": // a partial answer whatever was asked
		doc := `{"token":"` + v + `"}`
		w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-11/%d", len(doc)))
		w.WriteHeader(http.StatusPartialContent)
		io.WriteString(w, doc[:12])
	case "/adv/uall": // every character as an upper-case \u escape, as some JSON encoders write
		var b strings.Builder
		for _, r := range v {
			fmt.Fprintf(&b, `\u%04X`, r)
		}
		io.WriteString(w, `{"echo":"`+b.String()+`"}`)
	case "/adv/entity": // as decimal character references, in a header
		var b strings.Builder
		for _, r := range v {
			fmt.Fprintf(&b, "&#%d;", r)
		}
		w.Header().Set("X-Echo", b.String())
		io.WriteString(w, "ok")
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

// TestAdversarialRangeReadsWhole: the value, stored at its destination,
// must not come back in byte ranges that each hold only part of it (no
// scrubber recognises a part). egressd removes Range and If-Range from
// requests to a credential destination, so the client gets the whole
// document, scrubbed; a 206 from the destination is refused. Requests to
// other origins keep their ranges.
func TestAdversarialRangeReadsWhole(t *testing.T) {
	t.Parallel()
	f := newProxyFixture(t)
	c := f.client("inv-1", f.tok1, f.bundlePool(t))
	get := func(t *testing.T, u string, h map[string]string) (*http.Response, string) {
		is := is.New(t)
		req, _ := http.NewRequest("GET", u, nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		is.NoErr(err)
		body, err := io.ReadAll(resp.Body)
		is.NoErr(err)
		resp.Body.Close()
		f.checkCanary(t, string(body))
		return resp, string(body)
	}
	auth := "Bearer " + f.ph
	for _, h := range []map[string]string{
		{"Range": "bytes=0-15"},
		{"Range": "bytes=16-60"},
		{"Range": "bytes=0-15,16-60"},
		{"Range": "bytes=-20"},
		{"Range": "bytes=10-", "If-Range": `"x"`},
	} {
		t.Run(h["Range"], func(t *testing.T) {
			is := is.New(t)
			h["Authorization"] = auth
			resp, body := get(t, f.apiURL+"/adv/range", h)
			is.Equal(resp.StatusCode, http.StatusOK)
			is.Equal(resp.Header.Get("X-Saw-Range"), "|") // neither reached the upstream
			is.Equal(body, `{"token":"`+redact.Redacted+`"}`)
		})
	}
	t.Run("206 from the destination", func(t *testing.T) {
		is := is.New(t)
		resp, body := get(t, f.apiURL+"/adv/206", map[string]string{"Authorization": auth})
		is.Equal(resp.Header.Get("X-Hostkit-Error"), egressdapi.CodeUpstreamError)
		is.True(!strings.Contains(body, `{"token"`))
	})
	t.Run("other origins keep ranges", func(t *testing.T) {
		is := is.New(t)
		resp, body := get(t, f.otherURL+"/range", map[string]string{"Range": "bytes=2-5"})
		is.Equal(resp.StatusCode, http.StatusPartialContent)
		is.Equal(body, "2345")
	})
}

// TestAdversarialOtherInvocationReadsStore: a value placed at its
// destination and stored there must not come back raw to another
// invocation that holds no credentials but may reach that origin: its
// CONNECT there is intercepted (egressd's certificate, scrubbed answers),
// not an opaque tunnel. Its tunnels to other origins stay opaque.
func TestAdversarialOtherInvocationReadsStore(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newProxyFixture(t)
	tok4 := strings.Repeat("d", 43)
	_, err := f.eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-4", ProxyToken: tok4,
		Policy: egressdapi.Policy{Allow: []egressdapi.AllowRule{{Origin: f.apiURL}, {Origin: f.otherURL}}}})
	is.NoErr(err)
	req, _ := http.NewRequest("GET", f.apiURL+"/adv/keep", nil)
	req.Header.Set("Authorization", "Bearer "+f.ph)
	resp, err := f.client("inv-1", f.tok1, f.bundlePool(t)).Do(req) // inv-1 stores its value there
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(f.kept.Load(), canary)

	c := f.client("inv-4", tok4, f.bundlePool(t))
	resp, err = c.Get(f.apiURL + "/adv/show")
	is.NoErr(err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	is.Equal(resp.TLS.PeerCertificates[0].Issuer.CommonName, "hostkit egressd local CA") // intercepted
	is.Equal(string(body), `{"kept":"`+redact.Redacted+`"}`)
	f.checkCanary(t, string(body))

	resp, err = c.Get(f.otherURL + "/x") // not a credential destination: opaque, the server's own certificate
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.TLS.PeerCertificates[0].Issuer.CommonName, "egressd test CA")
}

// TestAdversarialEscapedEcho: an echo written with escapes the scrubber
// cannot replace in place (every character \u-escaped, character
// references in a header) never reaches the client: refused whole, or
// the stream cut off before its first byte; a plain echo is still
// scrubbed and passed on.
func TestAdversarialEscapedEcho(t *testing.T) {
	t.Parallel()
	f := newProxyFixture(t)
	c := f.client("inv-1", f.tok1, f.bundlePool(t))
	for path, refused := range map[string]bool{"/adv/uall": true, "/adv/entity": true, "/plain": false} {
		t.Run(path, func(t *testing.T) {
			is := is.New(t)
			req, _ := http.NewRequest("GET", f.apiURL+path, nil)
			req.Header.Set("Authorization", "Bearer "+f.ph)
			resp, err := c.Do(req)
			is.NoErr(err)
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			var all strings.Builder
			all.Write(body)
			for k, vs := range resp.Header {
				all.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
			}
			f.checkCanary(t, html.UnescapeString(all.String()))
			if refused {
				// Refused whole (found in a header, or before any of the
				// body was released), or cut off before the echo's first
				// byte: an incomplete body, never a clean end.
				if resp.Header.Get("X-Hostkit-Error") != egressdapi.CodeUpstreamError {
					is.Equal(resp.StatusCode, 200)
					is.True(rerr != nil)
				}
				is.True(!strings.Contains(all.String(), `\u00`) && !strings.Contains(all.String(), "&#"))
			} else {
				is.Equal(resp.StatusCode, 200)
				is.True(strings.Contains(string(body), redact.Redacted))
			}
		})
	}
}
