package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

// TestCheckHead: what checkHead refuses, and what it learns from a head
// it accepts.
func TestCheckHead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, head, code string
		host             string
	}{
		{"plain", "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", "", "a.test"},
		{"Host any case, OWS trimmed", "GET / HTTP/1.1\r\nhOsT: \t a.test \r\n\r\n", "", "a.test"},
		{"no Host", "GET / HTTP/1.1\r\nX: 1\r\n\r\n", "", ""},
		{"empty Host", "GET / HTTP/1.1\r\nHost:\r\n\r\n", "", ""},
		{"bare LF", "GET / HTTP/1.1\nHost: a\r\n\r\n", "egress.invalid_request", ""},
		{"bare CR", "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", "egress.invalid_request", ""},
		{"obs-fold (space)", "GET / HTTP/1.1\r\nHost: a\r\n b\r\n\r\n", "egress.invalid_request", ""},
		{"obs-fold (tab)", "GET / HTTP/1.1\r\nHost: a\r\n\tb\r\n\r\n", "egress.invalid_request", ""},
		{"two Host", "GET / HTTP/1.1\r\nHost: a\r\nHOST: a\r\n\r\n", "egress.header_invalid", ""},
		{"CL and TE", "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", "egress.header_invalid", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			n, err := headEnd([]byte(tc.head), 0)
			var h head
			if err == nil {
				is.Equal(n, len(tc.head)) // the head ends where it ends
				h, err = checkHead([]byte(tc.head))
			}
			if tc.code != "" {
				is.Equal(wire.CodeOf(err), tc.code)
				return
			}
			is.NoErr(err)
			is.Equal(string(h.host), tc.host)
		})
	}
	is := is.New(t)
	n, err := headEnd([]byte("GET / HTTP/1.1\r\nHost: a\r\n"), 0)
	is.NoErr(err)
	is.Equal(n, -1) // not all there yet
	n, err = headEnd([]byte("GET / HTTP/1.1\r"), 0)
	is.NoErr(err)
	is.Equal(n, -1) // a CR at the end may still be followed by LF
}

// FuzzCheckHead: headEnd finds the first CRLF CRLF, and a head that
// checkHead accepts is exactly what net/http's reader consumes (so the
// bytes after it are read as the body or the next request by both), with
// the same Host.
func FuzzCheckHead(f *testing.F) {
	for _, seed := range []string{
		"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n b\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\n\n",
		"GET / HTTP/1.1\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n",
		"\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := headEnd(b, 0)
		if err != nil || n < 0 {
			return
		}
		if i := bytes.Index(b, []byte("\r\n\r\n")); i+4 != n {
			t.Fatalf("headEnd(%q) = %d, the first CRLF CRLF ends at %d", b, n, i+4)
		}
		h, err := checkHead(b[:n])
		if err != nil {
			return
		}
		br := bufio.NewReader(bytes.NewReader(append(b[:n:n], "tail"...)))
		req, err := http.ReadRequest(br)
		if err != nil {
			return // net/http refuses it: so does egressd, with 400
		}
		if req.ContentLength == 0 && len(req.TransferEncoding) == 0 {
			if rest, _ := io.ReadAll(br); string(rest) != "tail" {
				t.Fatalf("net/http left %q after the head %q, not \"tail\"", rest, b[:n])
			}
		}
		abs := strings.Contains(req.RequestURI, "://") || req.Method == http.MethodConnect
		if !abs && h.hasHost && req.Host != string(h.host) {
			t.Fatalf("Host %q, net/http read %q", h.host, req.Host)
		}
	})
}
