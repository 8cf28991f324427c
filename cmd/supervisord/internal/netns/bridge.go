package netns

import (
	"context"
	"io"
	"log/slog"
	"net"
	"time"
)

// Bridge limits.
const (
	MaxConns    = 512             // concurrent bridged connections; more wait in the kernel's backlog
	DialTimeout = 5 * time.Second // to egressd's proxy socket
)

// Bridge accepts connections on l (the listener inside the namespace) and
// joins each to a new connection to the Unix socket at sock (egressd's
// proxy.sock: the same HTTP/1.1 forward-proxy protocol as its TCP
// listener), copying both ways with half-close. It returns when ctx ends or
// l fails, after closing l and every bridged connection. A connection
// whose dial fails (egressd is down or restarting) is answered 503
// egress.unavailable with Retry-After: 1 and closed: the agent is told to
// retry, never given another route.
func Bridge(ctx context.Context, l net.Listener, sock string, log *slog.Logger) error {
	return serveConns(ctx, l, func(in net.Conn, track func(net.Conn) func()) {
		defer in.Close()
		d := net.Dialer{Timeout: DialTimeout}
		out, err := d.DialContext(ctx, "unix", sock)
		if err != nil {
			log.Warn("netns.bridge_dial", slog.String("proxy_socket", sock), slog.Any("err", err))
			answerUnavailable(in)
			return
		}
		defer track(out)()
		defer out.Close()
		join(in, out)
	})
}

// closeWriter is a connection that can half-close (TCP and Unix).
type closeWriter interface{ CloseWrite() error }

// join copies a→b and b→a; each direction half-closes its destination
// at EOF; it returns when both are done.
func join(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(closeWriter); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}
