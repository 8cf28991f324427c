package netns

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"hostkit.dev/lib/api/egressdapi"
)

// TransparentPort is the relay's port on the namespace's loopback: the
// target of the redirect rule (nft_linux.go).
const TransparentPort = 4751

// PeekTimeout bounds the wait for a redirected connection's first bytes:
// a client that waits for the server to speak first is relayed as
// "other" once it passes.
const PeekTimeout = time.Second

// peekMax is how many of a client's first bytes the relay reads to tell
// TLS, HTTP and other apart (the longest method below, and a space).
const peekMax = 8

// Relay relays each connection the namespace's redirect rule sends it to
// egressd's proxy socket as `CONNECT host:port` (RFC 9110 section 9.3.6)
// with the instance's proxy credentials and egressdapi.HeaderTransparent:
// host is the name a synthetic address was given for (Names), or the
// literal address the client dialled. A synthetic address no name holds
// (one given by an earlier namespace, or guessed) is reset, never
// guessed at. egressd decides; a refused TLS or raw connection is reset,
// a refused plain-HTTP one gets egressd's answer.
type Relay struct {
	Names       *Names       // the synthetic addresses and the names they were given for
	ProxySocket string       // egressd's proxy.sock
	Auth        string       // the Proxy-Authorization value ("" sends none)
	Log         *slog.Logger // the holder's logger
	// origDst returns a connection's destination before the redirect.
	origDst func(*net.TCPConn) (netip.AddrPort, error)
}

// Serve relays the connections l accepts, at most MaxConns at once, until
// ctx ends or l fails; it closes l and every relayed connection before
// returning.
func (r *Relay) Serve(ctx context.Context, l net.Listener) error {
	return serveConns(ctx, l, func(c net.Conn, track func(net.Conn) func()) {
		if tc, ok := c.(*net.TCPConn); ok {
			r.relay(ctx, tc, track)
		}
	})
}

// target returns the CONNECT authority for dst.
func (r *Relay) target(dst netip.AddrPort) (string, bool) {
	port := strconv.Itoa(int(dst.Port()))
	if SyntheticPrefix.Contains(dst.Addr()) {
		name, ok := r.Names.Name(dst.Addr())
		return net.JoinHostPort(name, port), ok
	}
	return net.JoinHostPort(dst.Addr().String(), port), true
}

func (r *Relay) relay(ctx context.Context, in *net.TCPConn, track func(net.Conn) func()) {
	defer in.Close()
	dst, err := r.origDst(in)
	if err != nil {
		r.Log.Warn("netns.transparent", slog.String("outcome", "no_original_dst"), slog.Any("err", err))
		reset(in)
		return
	}
	authority, ok := r.target(dst)
	if !ok {
		r.Log.Warn("netns.transparent", slog.String("outcome", "unknown_synthetic"), slog.String("address", dst.String()))
		reset(in)
		return
	}
	peeked, mode := peek(in)
	d := net.Dialer{Timeout: DialTimeout}
	oc, err := d.DialContext(ctx, "unix", r.ProxySocket)
	if err != nil {
		r.Log.Warn("netns.transparent", slog.String("outcome", "proxy_unreachable"), slog.Any("err", err))
		reset(in)
		return
	}
	out := oc.(*net.UnixConn)
	defer track(out)()
	defer out.Close()
	head := "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n"
	if r.Auth != "" {
		head += "Proxy-Authorization: " + r.Auth + "\r\n"
	}
	head += egressdapi.HeaderTransparent + ": " + mode + "\r\n\r\n"
	_ = out.SetDeadline(time.Now().Add(DialTimeout + PeekTimeout))
	br := bufio.NewReader(out)
	_, err = io.WriteString(out, head)
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	}
	if err != nil {
		r.Log.Warn("netns.transparent", slog.String("outcome", "proxy_failed"), slog.Any("err", err))
		reset(in)
		return
	}
	_ = out.SetDeadline(time.Time{})
	if resp.StatusCode != http.StatusOK {
		if mode == egressdapi.TransparentHTTP {
			// The client sent an HTTP request: it gets egressd's refusal
			// as its answer (the code in X-Hostkit-Error).
			resp.Close = true
			_ = in.SetDeadline(time.Now().Add(DialTimeout))
			_ = resp.Write(in)
			// The rest of the request is read and dropped (briefly), so
			// that closing does not reset the answer away.
			_ = in.CloseWrite()
			_, _ = io.Copy(io.Discard, io.LimitReader(in, 64<<10))
			return
		}
		resp.Body.Close()
		reset(in)
		return
	}
	if _, err := out.Write(peeked); err != nil {
		reset(in)
		return
	}
	var upstream net.Conn = out
	if br.Buffered() > 0 {
		// egressd spoke past its answer: those bytes go first.
		upstream = &readerConn{UnixConn: out, r: br}
	}
	// Otherwise the connection itself, not the reader: io.Copy then
	// takes the kernel's splice path both ways, as the bridge does.
	join(in, upstream)
}

// methods are the request methods that mark a connection as plain HTTP.
var methods = []string{"GET ", "HEAD ", "POST ", "PUT ", "DELETE ", "OPTIONS ", "PATCH ", "TRACE ", "CONNECT "}

// classify tells what b, a connection's first bytes, begin: TLS (a
// handshake record, RFC 8446 section 5.1), HTTP (a request line's method
// and space) or other; done is false while more bytes could change it.
func classify(b []byte) (mode string, done bool) {
	if len(b) == 0 {
		return egressdapi.TransparentOther, false
	}
	if b[0] == 0x16 {
		if len(b) < 2 {
			return egressdapi.TransparentOther, false
		}
		if b[1] == 0x03 {
			return egressdapi.TransparentTLS, true
		}
		return egressdapi.TransparentOther, true
	}
	maybe := false
	for _, m := range methods {
		n := min(len(m), len(b))
		if string(b[:n]) == m[:n] {
			if n == len(m) {
				return egressdapi.TransparentHTTP, true
			}
			maybe = true
		}
	}
	return egressdapi.TransparentOther, !maybe
}

// peek reads the client's first bytes until classify is sure, peekMax
// bytes arrived, the client half-closed or PeekTimeout passed.
func peek(c net.Conn) ([]byte, string) {
	buf := make([]byte, peekMax)
	n := 0
	_ = c.SetReadDeadline(time.Now().Add(PeekTimeout))
	defer c.SetReadDeadline(time.Time{})
	for n < len(buf) {
		if _, done := classify(buf[:n]); done && n > 0 {
			break
		}
		k, err := c.Read(buf[n:])
		n += k
		if err != nil {
			break
		}
	}
	mode, _ := classify(buf[:n])
	return buf[:n], mode
}

// reset closes c with a TCP RST (SO_LINGER 0): the client sees its
// connection refused by the far side, as it would a closed port.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	c.Close()
}

// readerConn reads through r (what the CONNECT answer's reader holds
// first) and half-closes the Unix connection.
type readerConn struct {
	*net.UnixConn
	r *bufio.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }
