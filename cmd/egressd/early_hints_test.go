//go:build linux

package main

import (
	"bufio"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/redact"
)

// earlyHints answers every path with a 103 (Early Hints) before its 200:
// /early with a Link field, the key raw in X-Key (scrubbed in place) and
// a Set-Cookie (stripped); /early-esc with the key \u-escaped in X-Esc (a
// form that cannot be removed: the 103 is not passed on); /none with no
// 103. key is the value it puts in the fields.
func earlyHints(key string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		switch r.URL.Path {
		case "/early":
			h.Set("Link", "</style.css>; rel=preload")
			h.Set("X-Key", "k="+key)
			h.Set("Set-Cookie", "s=1")
		case "/early-esc":
			h.Set("Link", "</style.css>; rel=preload")
			h.Set("X-Esc", uEscape(key))
		}
		if r.URL.Path != "/none" {
			w.WriteHeader(http.StatusEarlyHints)
			clear(h) // the 103's fields are not the final answer's
		}
		io.WriteString(w, "ok")
	}
}

// hintsSeen is what a client's trace saw of 1xx answers.
type hintsSeen struct {
	mu     sync.Mutex
	codes  []int
	fields []textproto.MIMEHeader
}

// get sends GET target with c and returns the final answer's body and
// header; every 1xx lands in s.
func (s *hintsSeen) get(t *testing.T, c *http.Client, target, auth string) (string, http.Header) {
	t.Helper()
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.codes = append(s.codes, code)
		s.fields = append(s.fields, h)
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), "GET", target, nil)
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %q %v", target, resp.StatusCode, body, err)
	}
	return string(body), resp.Header
}

// take returns what s saw and resets it.
func (s *hintsSeen) take() ([]int, []textproto.MIMEHeader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	codes, fields := s.codes, s.fields
	s.codes, s.fields = nil, nil
	return codes, fields
}

// checkHints checks the three paths through c: /early's 103 arrives with
// its Link, its raw key scrubbed in place and without its Set-Cookie, and
// none of its fields in the final answer; /early-esc's 103 never arrives;
// /none has none.
func checkHints(t *testing.T, c *http.Client, base, auth string) {
	t.Helper()
	is := is.New(t)
	var s hintsSeen
	body, h := s.get(t, c, base+"/early", auth)
	is.Equal(body, "ok")
	codes, fields := s.take()
	is.Equal(codes, []int{http.StatusEarlyHints})
	is.Equal(fields[0].Get("Link"), "</style.css>; rel=preload")
	is.Equal(fields[0].Get("X-Key"), "k="+redact.Redacted)
	is.Equal(fields[0].Get("Set-Cookie"), "")
	is.Equal(h.Get("Link"), "") // the 103's fields stay in the 103
	is.Equal(h.Get("X-Key"), "")

	body, _ = s.get(t, c, base+"/early-esc", auth)
	is.Equal(body, "ok")
	codes, _ = s.take()
	is.Equal(len(codes), 0) // an escaped value cannot be cut out of a field: the 103 is dropped

	s.get(t, c, base+"/none", auth)
	codes, _ = s.take()
	is.Equal(len(codes), 0)
}

// TestEarlyHintsTunnel: a 103 (Early Hints) answer to a bodiless GET
// reaches a Go client inside an intercepted tunnel, over HTTP/1.1 and
// HTTP/2, with its fields sanitized as a header's; curl shows it too.
func TestEarlyHintsTunnel(t *testing.T) {
	t.Parallel()
	f := newAdvHTTP(t, earlyHints(canary))
	t.Run("h1", func(t *testing.T) { checkHints(t, f.client(t), f.url, f.ph) })
	t.Run("h2", func(t *testing.T) { checkHints(t, f.h2client(t), f.url, f.ph) })
	for _, proto := range []string{"--http1.1", "--http2"} {
		t.Run("curl "+proto, func(t *testing.T) {
			is := is.New(t)
			cmd := exec.Command("/usr/bin/curl", "-sS", "-v", "--max-time", "20", proto, "-H", "Authorization: Bearer "+f.ph, f.url+"/early")
			cmd.Env = f.env()
			out, err := cmd.CombinedOutput()
			is.NoErr(err)
			checkNoCanary(t, string(out))
			is.True(strings.Contains(string(out), " 103")) // "< HTTP/1.1 103 Early Hints" or "< HTTP/2 103"
			is.True(strings.Contains(strings.ToLower(string(out)), "< link: </style.css>; rel=preload"))
			is.True(strings.HasSuffix(string(out), "ok"))
		})
	}
}

// TestEarlyHintsPlain: a 103 (Early Hints) answer to a bodiless GET
// reaches an HTTP/1.1 client of the plain-HTTP face, sanitized; an
// HTTP/1.0 client never gets a 1xx (RFC 9110 section 15.2).
func TestEarlyHintsPlain(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	srv := &http.Server{Handler: earlyHints(canary)}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	origin := "http://" + l.Addr().String()
	f := newLLMFixture(t)
	tok := strings.Repeat("p", 43)
	// An invocation without credentials: the key in the 103's fields is
	// the canary the scrubber holds for inv-s.
	_, err = f.eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-plain", ProxyToken: tok,
		Policy: egressdapi.Policy{Allow: []egressdapi.AllowRule{{Origin: origin}}}})
	is.NoErr(err)
	u, _ := url.Parse("http://inv-plain:" + tok + "@" + f.info.ProxyAddress)
	checkHints(t, &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}}, origin, "")

	t.Run("HTTP/1.0 gets none", func(t *testing.T) {
		is := is.New(t)
		c, err := net.Dial("tcp", f.info.ProxyAddress)
		is.NoErr(err)
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		cred := "inv-plain:" + tok
		io.WriteString(c, "GET "+origin+"/early HTTP/1.0\r\nHost: "+l.Addr().String()+
			"\r\nProxy-Authorization: Basic "+base64.StdEncoding.EncodeToString([]byte(cred))+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		is.NoErr(err) // the first answer read: a 1xx would be it
		is.Equal(resp.StatusCode, 200)
		is.Equal(resp.Header.Get("Link"), "")
		body, _ := io.ReadAll(resp.Body)
		is.Equal(string(body), "ok")
	})
}
