//go:build linux

package main

import (
	"encoding/base32"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestProxyFaceStrictDaemon: the real daemon, raw on its TCP listener and
// its Unix proxy socket: Content-Length beside Transfer-Encoding, an
// HTTP/1.1 request without Host, malformed chunked framing and bare CR or
// LF line endings each get a 400 answer with their code before the
// connection closes, and none reaches the upstream; the same request
// framed correctly does.
func TestProxyFaceStrictDaemon(t *testing.T) {
	t.Parallel()
	f := newProxyFixture(t)
	host := strings.TrimPrefix(f.plainURL, "http://")
	auth := "Proxy-Authorization: " + basic("inv-3", f.tok3) + "\r\n"
	line := "POST " + f.plainURL + "/strict HTTP/1.1\r\n"
	for _, tc := range []struct{ name, raw, code string }{
		{"Content-Length and Transfer-Encoding", line + "Host: " + host + "\r\n" + auth + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "egress.header_invalid"},
		{"no Host", line + auth + "Content-Length: 3\r\n\r\nabc", "egress.header_invalid"},
		{"chunk size not hex", line + "Host: " + host + "\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", "egress.invalid_request"},
		{"chunk line with a bare LF", line + "Host: " + host + "\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n", "egress.invalid_request"},
		{"head line with a bare LF", line + "Host: " + host + "\n" + auth + "Content-Length: 3\r\n\r\nabc", "egress.invalid_request"},
		{"head line with a bare CR", line + "Host: " + host + "\r\nX-A: 1\r2\r\n" + auth + "Content-Length: 3\r\n\r\nabc", "egress.invalid_request"},
	} {
		for via, dial := range map[string]func() (net.Conn, error){"tcp": f.dialTCP, "unix": f.dialUnix} {
			t.Run(via+"/"+tc.name, func(t *testing.T) {
				is := is.New(t)
				c, err := dial()
				is.NoErr(err)
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				_, err = io.WriteString(c, tc.raw)
				is.NoErr(err)
				b, _ := io.ReadAll(c) // the answer, then the close
				is.True(strings.HasPrefix(string(b), "HTTP/1.1 400 "))
				is.True(strings.Contains(string(b), "X-Hostkit-Error: "+tc.code+"\r\n"))
			})
		}
	}
	is := is.New(t)
	is.Equal(len(f.plain.all()), 0) // nothing reached the upstream
	resp := f.rawProxy(t, f.dialUnix, line+"Host: "+host+"\r\n"+auth+"Content-Length: 3\r\n\r\nabc")
	is.Equal(resp.StatusCode, 200) // the control
	is.Equal(f.plain.all(), []string{"POST /strict auth="})
	f.checkCanary(t, "")
}

// TestHostScanDaemon: curl through the real daemon towards a name that
// carries the value (hex, base32) is refused at CONNECT with
// egress.secret_in_request, as is an absolute-form request and a Host
// field carrying it; the audit trail has the refusals and, like the log
// and egressd's answers, no form of the value.
func TestHostScanDaemon(t *testing.T) {
	t.Parallel()
	f := newProxyFixture(t)
	h := fmt.Sprintf("%x", canary)
	b32 := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString([]byte(canary)))
	var answers []string // egressd's answers (curl's own output echoes the URL it was given)
	for _, name := range []string{h + ".other.test", b32[:20] + "." + b32[20:] + ".other.test"} {
		out := f.curl(t, "inv-1", f.tok1, "https://"+name+"/")
		if !strings.Contains(out, "CONNECT tunnel failed, response 403") {
			t.Fatalf("curl was not refused with 403:\n%s", out)
		}
	}
	is := is.New(t)
	auth := "Proxy-Authorization: " + basic("inv-3", f.tok3) + "\r\n"
	for _, raw := range []string{
		"GET https://" + h + ".other.test/ HTTP/1.1\r\nHost: " + h + ".other.test\r\n" + auth + "\r\n",
		"GET " + f.plainURL + "/ HTTP/1.1\r\nHost: " + h + ".example.com\r\n" + auth + "\r\n",
	} {
		resp := f.rawProxy(t, f.dialTCP, raw)
		body, _ := io.ReadAll(resp.Body)
		answers = append(answers, string(body))
		is.Equal(resp.StatusCode, http.StatusForbidden)
		is.Equal(code(resp), "egress.secret_in_request")
	}
	is.Equal(len(f.plain.all()), 0)
	is.Equal(len(f.other.all()), 0)
	is.True(strings.Count(f.eg.auditLog(t), `"code":"egress.secret_in_request"`) >= 4)
	f.checkCanary(t, strings.Join(answers, "\n"))
}
