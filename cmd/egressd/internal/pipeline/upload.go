package pipeline

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/inject"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/wire"
)

// upload is a request body sent upstream as it arrives (Input.BodyStream):
// the transport reads it, and it hands out only what the outbound scan
// (Outbound) released. On a finding it hands out nothing more and fails
// the transport's read, so the upstream never sees a request that looks
// complete: a chunked body lacks its last chunk, a body of announced
// length is cut short with the connection closed, an HTTP/2 stream is
// reset. Read runs on the transport's goroutine; failure, finish and
// sent on the exchange's.
type upload struct {
	src    io.Reader
	sc     *Outbound
	b      *bundle.Bundle
	cancel context.CancelFunc // ends the exchange on a failure

	piece []byte // one read from src
	pend  []byte // read and not handed out from off on: body bytes from at on
	off   int
	at    int64
	rel   int64 // bytes the scan released
	eof   bool  // src ended and the scan released everything

	mu      sync.Mutex
	sent    int64 // bytes handed to the transport (network_egress_bytes)
	err     error // the finding, or the client's body failing
	stopped bool  // the exchange ended: nothing more is handed out
}

// uploadPiece is the size of one read of a streamed request body.
const uploadPiece = 32 << 10

func (p *Pipeline) newUpload(in Input, b *bundle.Bundle, cancel context.CancelFunc) *upload {
	return &upload{src: in.BodyStream, sc: p.NewOutbound(true), b: b, cancel: cancel, piece: make([]byte, uploadPiece)}
}

// Read hands the transport the next released bytes of the body.
func (u *upload) Read(p []byte) (int, error) {
	for {
		if n := min(int64(len(p)), u.rel-u.at); n > 0 {
			return u.handOut(p[:n])
		}
		if u.eof {
			return 0, io.EOF
		}
		if err := u.failure(); err != nil {
			return 0, err
		}
		n, rerr := u.src.Read(u.piece)
		if n > 0 {
			if u.off > 0 { // keep only the held-back tail
				u.pend, u.off = u.pend[:copy(u.pend, u.pend[u.off:])], 0
			}
			u.pend = append(u.pend, u.piece[:n]...)
			rel, err := u.sc.Next(u.piece[:n])
			if err != nil {
				return 0, u.fail(err)
			}
			u.rel = rel
		}
		switch {
		case rerr == io.EOF:
			rel, err := u.sc.Close()
			if err != nil {
				return 0, u.fail(err)
			}
			u.rel, u.eof = rel, true
		case rerr != nil:
			if wire.CodeOf(rerr) == wire.CodeInternal {
				rerr = wire.Wrap(egressdapi.CodeInvalidRequest, "the request body broke off (chunked framing, or shorter than announced)", rerr)
			}
			return 0, u.fail(rerr)
		}
	}
}

// handOut copies the first len(p) pending bytes to p and counts them.
func (u *upload) handOut(p []byte) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.stopped {
		return 0, errUploadStopped()
	}
	if u.err != nil {
		return 0, u.err
	}
	n := copy(p, u.pend[u.off:])
	u.off += n
	u.at += int64(n)
	u.sent += int64(n)
	u.b.AddBytes(uint64(n))
	return n, nil
}

// errUploadStopped fails a read after the exchange ended.
func errUploadStopped() error {
	return wire.Errorf(egressdapi.CodeClientClosed, "the exchange ended before the request body was sent")
}

// fail records err (the first failure counts), ends the exchange and
// returns err.
func (u *upload) fail(err error) error {
	u.mu.Lock()
	if u.err == nil {
		u.err = err
	}
	err = u.err
	u.mu.Unlock()
	u.cancel()
	return err
}

// failure returns what failed the body (nil: nothing).
func (u *upload) failure() error {
	if u == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// finish stops the body (a read still in progress hands nothing more
// out) and returns how many bytes were sent.
func (u *upload) finish() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.stopped = true
	return u.sent
}

// Close is the transport's: the body is the caller's, whose reader the
// caller closes.
func (u *upload) Close() error { return nil }

// streamedBytes is what network_egress_bytes counts for a streamed
// body's framing field (its bytes are counted as they are sent).
func streamedBytes(n int64) uint64 {
	if n < 0 {
		return uint64(len("Transfer-Encoding: chunked\r\n"))
	}
	return uint64(len("Content-Length: \r\n") + len(strconv.FormatInt(n, 10)))
}

// withInformational returns ctx with a trace that passes the upstream's
// 1xx answers before the final one (not 101) to f, their fields
// sanitized as a header's (an answer whose fields hold an echo is not
// passed on).
func (p *Pipeline) withInformational(ctx context.Context, f func(int, []request.Field)) context.Context {
	if f == nil {
		return ctx
	}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		if out, err := p.SanitizeFields(http.Header(h)); err == nil {
			f(code, out)
		}
		return nil
	}})
}

// skipContinue returns f without its 100 (Continue) answers (nil for a
// nil f).
func skipContinue(f func(int, []request.Field)) func(int, []request.Field) {
	if f == nil {
		return nil
	}
	return func(code int, h []request.Field) {
		if code != http.StatusContinue {
			f(code, h)
		}
	}
}

// sendUpload is Send for a request whose body streams (up): the body
// goes with its announced length (-1: chunked on HTTP/1.1), and a
// client's "Expect: 100-continue" goes to the upstream, whose 1xx
// answers reach info (the client waits for the upstream, not egressd).
func (p *Pipeline) sendUpload(ctx context.Context, rec *request.Record, r transport.Route, in Input, up *upload) (*http.Response, error) {
	expect := rec.Header.Get("Expect")
	req := p.newRequest(rec, in.Upgrade)
	if strings.EqualFold(strings.TrimSpace(expect), "100-continue") {
		req.Header["Expect"] = []string{"100-continue"}
	}
	req.Body, req.ContentLength = up, in.BodyLength
	return p.cfg.Transport.RoundTripContext(p.withInformational(ctx, in.Informational), req, rec.OriginString(), r)
}

// BodyTarget reports whether a request of b to rawURL must have its
// body read whole before it is sent: b holds a credential placed in a
// body (a JSON-pointer target, RFC 6901) whose destination is rawURL's
// origin, so the body may hold its placeholder. A URL that does not
// parse also answers true (the pipeline refuses it; its body is read as
// any refused one is). Every other body may stream (Input.BodyStream).
func (p *Pipeline) BodyTarget(b *bundle.Bundle, rawURL string) bool {
	var body bool
	_ = b.Use(func(creds []*bundle.Credential) error {
		for _, c := range creds {
			body = body || c.Target.Kind == inject.KindBody
		}
		return nil
	})
	if !body {
		return false
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return true
	}
	host, port, err := p.auth.SplitHostPort(u.Host)
	if err != nil {
		return true
	}
	o := netguard.Origin{Scheme: strings.ToLower(u.Scheme), Host: host, Port: port}
	if o.Port == netguard.DefaultPort(o.Scheme) {
		o.Port = 0
	}
	_ = b.Use(func(creds []*bundle.Credential) error {
		body = false
		for _, c := range creds {
			body = body || (c.Target.Kind == inject.KindBody && c.Destination == o)
		}
		return nil
	})
	return body
}
