package netns

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/egressdapi"
)

// TestBridgeAnswersUnavailable: while egressd's proxy socket refuses
// connections, a proxied request and a CONNECT each get the answer
// egressd gives an unknown invocation right after a restart (503
// egress.unavailable, Retry-After: 1), never a silent close or another
// route; once the socket accepts again, connections are joined to it.
func TestBridgeAnswersUnavailable(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir, err := os.MkdirTemp("/tmp", "nsu")
	is.NoErr(err)
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "proxy.sock")
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Bridge(ctx, tl, sock, slog.New(slog.DiscardHandler)) }()
	defer func() { cancel(); <-done }()

	ask := func(raw string) *http.Response {
		t.Helper()
		c, err := net.Dial("tcp", tl.Addr().String())
		is.NoErr(err)
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		_, err = io.WriteString(c, raw)
		is.NoErr(err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		is.NoErr(err)
		b, err := io.ReadAll(resp.Body)
		is.NoErr(err)
		resp.Body = io.NopCloser(strings.NewReader(string(b)))
		return resp
	}
	for _, raw := range []string{
		"GET http://api.test/v1 HTTP/1.1\r\nHost: api.test\r\nProxy-Authorization: Basic eDp5\r\n\r\n",
		"CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n",
	} {
		resp := ask(raw)
		is.Equal(resp.StatusCode, http.StatusServiceUnavailable)
		is.Equal(resp.Header.Get("X-Hostkit-Error"), egressdapi.CodeUnavailable)
		is.Equal(resp.Header.Get("Retry-After"), "1")
		b, _ := io.ReadAll(resp.Body)
		is.True(strings.Contains(string(b), egressdapi.CodeUnavailable))
	}

	// The socket is back: the next connection reaches it.
	ul, err := net.Listen("unix", sock)
	is.NoErr(err)
	defer ul.Close()
	go func() {
		for {
			c, err := ul.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err == nil {
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
				}
			}()
		}
	}()
	resp := ask("GET http://api.test/v1 HTTP/1.1\r\nHost: api.test\r\n\r\n")
	is.Equal(resp.StatusCode, http.StatusOK)
	is.Equal(resp.Header.Get("X-Hostkit-Error"), "")
}
