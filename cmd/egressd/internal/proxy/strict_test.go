package proxy

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// strictCase is one request head and body, written raw, and the answer
// it must get.
type strictCase struct {
	name      string
	head      string // after the request line; "{H}" is the Host field line
	body      string
	halfClose bool   // the client ends its side after writing
	status    int    // 0: passes the proxy face's checks (the pipeline answers)
	code      string // X-Hostkit-Error of a refusal
	closed    bool   // the connection is closed after the answer
	line      string // the request line's version; default HTTP/1.1
}

var strictCases = []strictCase{
	{name: "Content-Length and Transfer-Encoding", head: "{H}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", body: "3\r\nabc\r\n0\r\n\r\n", status: 400, code: "egress.header_invalid", closed: true},
	{name: "Transfer-Encoding then Content-Length", head: "{H}transfer-encoding: chunked\r\ncontent-length: 4\r\n", body: "3\r\nabc\r\n0\r\n\r\n", status: 400, code: "egress.header_invalid", closed: true},
	{name: "HTTP/1.1 without Host", head: "Content-Length: 0\r\n", status: 400, code: "egress.header_invalid", closed: true},
	{name: "two Host fields", head: "{H}{H}", status: 400, code: "egress.header_invalid", closed: true},
	{name: "bare LF ends a line", head: "{H}X-A: 1\nX-B: 2\r\n", status: 400, code: "egress.invalid_request", closed: true},
	{name: "bare CR in a value", head: "{H}X-A: 1\r2\r\n", status: 400, code: "egress.invalid_request", closed: true},
	{name: "folded field (obs-fold)", head: "{H}X-A: 1\r\n 2\r\n", status: 400, code: "egress.invalid_request", closed: true},
	{name: "chunk size not hex", head: "{H}Transfer-Encoding: chunked\r\n", body: "zz\r\nabc\r\n0\r\n\r\n", status: 400, code: "egress.invalid_request", closed: true},
	{name: "chunk data without its CRLF", head: "{H}Transfer-Encoding: chunked\r\n", body: "3\r\nabcX0\r\n\r\n", status: 400, code: "egress.invalid_request", closed: true},
	{name: "chunk line ends in a bare LF", head: "{H}Transfer-Encoding: chunked\r\n", body: "3\nabc\r\n0\r\n\r\n", status: 400, code: "egress.invalid_request", closed: true},
	{name: "chunk line with a bare CR", head: "{H}Transfer-Encoding: chunked\r\n", body: "3\r;x\r\nabc\r\n0\r\n\r\n", status: 400, code: "egress.invalid_request", closed: true},
	{name: "body shorter than its Content-Length", head: "{H}Content-Length: 10\r\n", body: "abc", halfClose: true, status: 400, code: "egress.invalid_request", closed: true},
	{name: "connection ends inside the head", head: "{H}X-A: 1\r\n", halfClose: true, status: 400, code: "egress.invalid_request", closed: true, line: "HTTP/1.1 cut"},
	{name: "HTTP/1.0 with Transfer-Encoding", head: "{H}Transfer-Encoding: chunked\r\n", body: "3\r\nabc\r\n0\r\n\r\n", status: 400, code: "egress.header_invalid", closed: true, line: "HTTP/1.0"},
	// Controls: what the checks let through reaches the pipeline.
	{name: "control: Content-Length", head: "{H}Content-Length: 3\r\n", body: "abc"},
	{name: "control: chunked (closed after: RFC 9112 6.3)", head: "{H}Transfer-Encoding: chunked\r\n", body: "3\r\nabc\r\n0\r\n\r\n", closed: true},
	{name: "control: HTTP/1.0 without Host", head: "Content-Length: 0\r\n", line: "HTTP/1.0", closed: true},
}

// raw builds the case's request to target (an absolute URL outside a
// tunnel, a path inside one) with Host field host and the extra lines
// auth (the Proxy-Authorization line outside a tunnel).
func (tc strictCase) raw(target, host, auth string) string {
	version := tc.line
	if version == "" || version == "HTTP/1.1 cut" {
		version = "HTTP/1.1"
	}
	head := strings.ReplaceAll(tc.head, "{H}", "Host: "+host+"\r\n")
	raw := "POST " + target + " " + version + "\r\n" + auth + head
	if tc.line == "HTTP/1.1 cut" {
		return raw // no empty line: the head never ends
	}
	return raw + "\r\n" + tc.body
}

// TestProxyFaceStrict sends each case raw on the TCP listener, the Unix
// socket and inside an intercepted tunnel: every refusal is an HTTP
// answer with its code, audited, before the connection closes; nothing
// refused is looked up or dialled; the controls pass the checks (and get
// the pipeline's answer: nothing resolves here).
func TestProxyFaceStrict(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, tc := range strictCases {
		for via, dial := range h.dialers() {
			t.Run(via+"/"+tc.name, func(t *testing.T) {
				is := is.New(t)
				resp, _, closed := exchange(t, dial, tc.raw("https://strict.example.com/p", "strict.example.com", h.auth("open")), tc.halfClose, true)
				h.checkStrict(t, tc, resp, closed)
				is.True(strings.Contains(h.auditText(t), `"code":"`+resp.Header.Get(HeaderError)+`"`)) // audited
			})
		}
		t.Run("tunnel/"+tc.name, func(t *testing.T) {
			tc2, br := h.intercepted(t, "api.example.com", "api.example.com")
			if _, err := io.WriteString(tc2, tc.raw("/p", "api.example.com", "")); err != nil {
				t.Fatal(err)
			}
			if tc.halfClose {
				_ = tc2.CloseWrite()
			}
			resp, _, closed := readAnswer(t, tc2, br, true)
			h.checkStrict(t, tc, resp, closed)
		})
	}
	// Refused requests reached nothing: the only lookups and dials are the
	// controls'.
	names, dialled := h.rec.Seen()
	controls := 0
	for _, tc := range strictCases {
		if tc.status == 0 {
			controls++
		}
	}
	is := is.New(t)
	is.Equal(len(names), 2*controls) // each control once per listener
	is.Equal(len(dialled), controls) // and once inside a tunnel (api.example.com is mapped, then dialled)
}

// checkStrict checks an answer against the case.
func (h *harness) checkStrict(t *testing.T, tc strictCase, resp *http.Response, closed bool) {
	t.Helper()
	is := is.New(t)
	if tc.status == 0 {
		is.Equal(resp.Header.Get(HeaderError), "egress.upstream_error") // the pipeline ran
	} else {
		is.Equal(resp.StatusCode, tc.status)
		is.Equal(resp.Header.Get(HeaderError), tc.code)
	}
	is.Equal(closed, tc.closed) // closed after the answer
}

// TestProxyFaceTimeouts: a head that stops after its request line, and a
// body that stops before its length, get 408 egress.timeout before the
// connection closes; a connection that sends nothing is closed without
// an answer (there was no request).
func TestProxyFaceTimeouts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) {
		c.HandshakeTimeout, c.ExchangeIdle, c.IdleTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	})
	for _, tc := range []struct{ name, raw string }{
		{"head stops after the request line", "GET https://slow.example.com/ HTTP/1.1\r\nHost: slow.example.com\r\n"},
		{"body stops early", "POST https://slow.example.com/ HTTP/1.1\r\nHost: slow.example.com\r\n" + h.auth("open") + "Content-Length: 10\r\n\r\nabc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			resp, _, closed := exchange(t, h.dialers()["tcp"], tc.raw, false, true)
			is.Equal(resp.StatusCode, http.StatusRequestTimeout)
			is.Equal(resp.Header.Get(HeaderError), "egress.timeout")
			is.True(closed)
		})
	}
	// Before a request line there is no request to answer: closed silently.
	for name, sent := range map[string]string{"nothing sent": "", "partial request line": "GET https://slo"} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			c, err := net.Dial("tcp", h.tcp)
			is.NoErr(err)
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = io.WriteString(c, sent)
			is.NoErr(err)
			n, err := c.Read(make([]byte, 1))
			is.Equal(n, 0)
			is.Equal(err, io.EOF) // closed, no answer
		})
	}
}

// TestReadHeadGrows: a head larger than the connection's read buffer
// (4 KiB, grown by doubling) but within MaxHeaderBytes is read whole; one
// over the limit is 413.
func TestReadHeadGrows(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	is := is.New(t)
	big := "X-Big: " + strings.Repeat("a", 40<<10) + "\r\n"
	resp, _, _ := exchange(t, h.dialers()["tcp"], "GET https://big.example.com/ HTTP/1.1\r\nHost: big.example.com\r\n"+h.auth("open")+big+"\r\n", false, false)
	is.Equal(resp.Header.Get(HeaderError), "egress.upstream_error") // read whole, passed on
	huge := "X-Big: " + strings.Repeat("a", 70<<10) + "\r\n"
	resp, _, closed := exchange(t, h.dialers()["tcp"], "GET https://big.example.com/ HTTP/1.1\r\nHost: big.example.com\r\n"+h.auth("open")+huge+"\r\n", false, true)
	is.Equal(resp.StatusCode, http.StatusRequestEntityTooLarge)
	is.True(closed)
}
