// Package pipeline is egressd's mediated egress pipeline (docs/egressd.md,
// "The pipeline"):
//
//	validation → credential resolution → policy → scanning → routing →
//	injection → transport → response sanitization
//
// Each step is a method tested on its own; Do runs them in order for one
// request, writes one audit record before the request is sent and one after
// (or a single record for a refusal), counts outbound bytes and logs one
// canonical `egress.decision` line. The proxy face (docs/egressd.md,
// "Placeholder substitution") reuses the same steps with placeholder
// substitution in place of injection.
package pipeline

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"time"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/cmd/egressd/internal/scan"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/audit"
)

// OwnerChecker checks who owns a loopback listener (loopowner.Checker).
type OwnerChecker interface {
	Check(addr netip.AddrPort) ([]uint32, error)
}

// Auditor writes audit records (*audit.Log).
type Auditor interface {
	Append(ctx context.Context, r audit.Record) (uint64, error)
	Begin(ctx context.Context, r audit.Record) (audit.Pair, error)
}

// DefaultStripResponse lists the response headers removed besides the
// hop-by-hop ones and egressd's reserved X-Hostkit-* headers.
var DefaultStripResponse = []string{"Set-Cookie", "Set-Cookie2", "Authorization", "Proxy-Authenticate", "Proxy-Authorization"}

// DefaultMaxBuffered is the most body bytes a buffered answer (Do) holds:
// it must fit one lib/wire frame with its header fields.
const DefaultMaxBuffered = 4 << 20

// Config holds a Pipeline's dependencies and limits. Zero limits take the
// defaults noted.
type Config struct {
	Registry  *bundle.Registry     // the bundles: credentials and policies by invocation
	Transport *transport.Transport // the checked-address dialer and connection pools
	Owner     OwnerChecker         // the loopback listener owner check
	Audit     Auditor              // the audit sink: before/after and refused records
	Logger    *slog.Logger         // the redacting logger: one egress.decision line per request
	Limits    request.Limits       // request caps (request.Limits defaults)
	// MaxResponse caps a response body in decoded bytes; past it the
	// answer is cut (egress.response_too_large). Zero: no cap.
	MaxResponse int
	// MaxBuffered caps the body of an answer Do reads whole (the buffered
	// egress.request op, which answers in one frame); default
	// DefaultMaxBuffered.
	MaxBuffered int
	// IdleTimeout ends an exchange whose upstream sent no byte for this
	// long once the response header arrived (the dial, TLS and header
	// phases have the transport's own timeouts). Zero: none.
	IdleTimeout time.Duration
	// TotalTimeout bounds a whole exchange, from the request to the end
	// of the response body. Zero: none (an LLM stream may run for many
	// minutes).
	TotalTimeout  time.Duration
	StripResponse []string // default DefaultStripResponse
	UserAgent     string   // sent when the caller sets none; default "hostkit-egressd"
}

// Pipeline runs requests through the steps. Create with New.
type Pipeline struct {
	cfg    Config
	scan   scan.Scanner
	strip  map[string]bool
	auth   request.Authorities // canonical hosts of the authorities seen
	bufs   bufPool             // streamed bodies' large buffers (streambuf.go)
	smalls bufPool             // and their small read buffers
}

// New returns a Pipeline.
func New(cfg Config) *Pipeline {
	if cfg.MaxBuffered <= 0 {
		cfg.MaxBuffered = DefaultMaxBuffered
	}
	if cfg.StripResponse == nil {
		cfg.StripResponse = DefaultStripResponse
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "hostkit-egressd"
	}
	p := &Pipeline{cfg: cfg, strip: map[string]bool{}}
	p.bufs.size, p.smalls.size = bigRead, smallRead
	p.scan = scan.Scanner{Scrubber: cfg.Registry.Scrubber(), Holds: cfg.Registry.Holds, HoldsString: cfg.Registry.HoldsString}
	for _, h := range cfg.StripResponse {
		p.strip[canonical(h)] = true
	}
	return p
}

// Input is one request as a caller gives it.
type Input struct {
	Invocation string          // the bundle the request goes out for
	Method     string          // the HTTP method token
	URL        string          // the absolute target URL, as sent
	Header     []request.Field // the caller's header fields, in order
	Body       []byte          // the request body; nil = none
	Actor      audit.Actor     // the peer, for audit
	Corr       string          // correlation id, for audit and the log line
	// Bundle, when set, is used instead of looking Invocation up (the
	// proxy face has authenticated it already, or it is the anonymous
	// bundle).
	Bundle *bundle.Bundle
	// Substitute selects the proxy face's steps (docs/egressd.md,
	// "Placeholder substitution"): Placements in place of Resolve and
	// Substitute in place of Inject.
	Substitute bool
	// Fields are extra audit fields (the proxy face's listener and tunnel).
	Fields map[string]any
	// Upgrade asks the upstream to switch protocols: "websocket" (RFC
	// 6455 section 4.1; a GET) or "" for none. The request goes out with
	// "Connection: Upgrade" and "Upgrade: websocket" and without
	// Sec-WebSocket-Extensions (no extension is negotiated, so every
	// frame can be scanned); a 101 answer is then Stream.Upgraded.
	Upgrade string
	// BodyStream, when set, is the request body still arriving, sent
	// upstream as it is read (Body is then not used; a caller sets it
	// only when no credential of the bundle is placed in a body for this
	// origin: a JSON-pointer target needs the body whole). What is read
	// goes through the outbound scan (Outbound) and only what it
	// releases is sent; a finding fails the upstream request before its
	// body is complete, and is the exchange's error with the buffered
	// scan's code. A read error typed with a code (the caller's timeout,
	// egress.timeout) is the exchange's error as it is; any other is
	// egress.invalid_request. Not bounded by Limits: each byte is
	// counted as it is sent. The caller keeps the reader's end: the
	// pipeline never closes it.
	BodyStream io.Reader
	// BodyLength is BodyStream's announced length in bytes (-1: unknown,
	// sent chunked to an HTTP/1.1 upstream).
	BodyLength int64
	// Informational, when set, receives each 1xx answer of the upstream
	// before the final one (100 Continue, 103 Early Hints; never 101)
	// with its fields sanitized as a header's; an answer whose fields
	// hold a value in a form that cannot be removed is not passed on.
	// A 100 is passed on only with BodyStream (a body sent whole went
	// without the client's Expect, which egressd answered itself). It
	// runs on the transport's goroutine before DoStream returns, or not
	// at all.
	Informational func(status int, header []request.Field)
}

// Output is the sanitized upstream answer.
type Output struct {
	Status int             // the upstream's status code
	Header []request.Field // sorted by name; repeats kept in order
	Body   []byte          // decoded and scrubbed; at most Config.MaxBuffered bytes
}
