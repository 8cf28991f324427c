package pipeline

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

func canonical(h string) string { return http.CanonicalHeaderKey(h) }

// Send is step 7: it sends rec to the checked route and returns the
// response with its body read (at most MaxResponse bytes). rec is the
// record as sent, owned by this request: the default User-Agent is added
// to its header in place (RequestBytes counts it already). Redirects are
// returned, not followed. Errors: egress.timeout, egress.upstream_error,
// egress.response_too_large.
func (p *Pipeline) Send(ctx context.Context, rec *request.Record, r transport.Route) (*http.Response, []byte, error) {
	h := rec.Header
	if h == nil {
		h = http.Header{}
		rec.Header = h
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{p.cfg.UserAgent}
	}
	req := &http.Request{
		Method: rec.Method, URL: rec.URL(), Header: h, Host: rec.Authority(),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: int64(len(rec.Body)),
	}
	if len(rec.Body) > 0 {
		body := rec.Body
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := p.cfg.Transport.RoundTripContext(ctx, req, rec.OriginString(), r)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := readBody(resp, p.cfg.MaxResponse)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, wire.Wrap(egressdapi.CodeTimeout, "upstream body did not arrive in time", err)
		}
		return nil, nil, wire.Wrap(egressdapi.CodeUpstreamError, "upstream body could not be read", err)
	}
	if len(body) > p.cfg.MaxResponse {
		return nil, nil, wire.Errorf(egressdapi.CodeResponseTooLarge, "response body is larger than %d bytes", p.cfg.MaxResponse)
	}
	return resp, body, nil
}

// readBody reads at most max+1 bytes of resp's body: into one buffer of
// the announced length when there is one (io.ReadAll would start at 512
// bytes and grow), then on as usual should more arrive. An answer to HEAD
// has none.
func readBody(resp *http.Response, max int) ([]byte, error) {
	if resp.Request != nil && resp.Request.Method == http.MethodHead {
		// No body follows an answer to HEAD, whatever its Content-Length
		// says; reading to the end lets the connection be reused.
		_, err := io.Copy(io.Discard, resp.Body)
		return nil, err
	}
	cl := resp.ContentLength
	if cl < 0 || cl > int64(max) {
		return io.ReadAll(io.LimitReader(resp.Body, int64(max)+1))
	}
	// One byte more than announced, for the probe past the end (a
	// separate array would escape through the interface call).
	buf := make([]byte, cl, cl+1)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		return nil, err
	}
	n, err := resp.Body.Read(buf[cl : cl+1])
	if n == 0 && err == io.EOF {
		return buf, nil // the usual end: net/http stops at Content-Length
	}
	if err != nil && err != io.EOF {
		return nil, err
	}
	buf = buf[:cl+int64(n)]
	rest, err := io.ReadAll(io.LimitReader(resp.Body, int64(max)-cl))
	return append(buf, rest...), err
}

// RequestBytes is what network_egress_bytes counts for rec: the request
// line, the headers (with Host, Content-Length and the default User-Agent
// as sent) and the body, in HTTP/1.1 form.
func (p *Pipeline) RequestBytes(rec *request.Record) uint64 {
	n := len(rec.Method) + 1 + len(rec.Target()) + len(" HTTP/1.1\r\n")
	n += len("Host: \r\n") + len(rec.Authority())
	for k, vs := range rec.Header {
		for _, v := range vs {
			n += len(k) + len(": \r\n") + len(v)
		}
	}
	if _, ok := rec.Header["User-Agent"]; !ok {
		n += len("User-Agent: \r\n") + len(p.cfg.UserAgent)
	}
	if len(rec.Body) > 0 {
		n += len("Content-Length: \r\n") + len(strconv.Itoa(len(rec.Body)))
	}
	return uint64(n + 2 + len(rec.Body))
}

// hopByHop response headers (RFC 9110 §7.6.1) and framing headers that no
// longer describe the body egressd returns.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade", "Content-Length", "Content-Encoding"}

// hopByHopSet is hopByHop as a set (the names are canonical).
var hopByHopSet = func() map[string]bool {
	m := map[string]bool{}
	for _, h := range hopByHop {
		m[canonical(h)] = true
	}
	return m
}()

// wholeOnly removes Range and If-Range (RFC 9110 sections 14.2 and 13.1.5)
// from rec, the record as sent to the destination of a held credential:
// the answer is then the whole representation, which Sanitize scrubs as
// one text. A held value that was placed there and stored (an object
// store, a paste service) could otherwise be read back in byte ranges
// that each hold only a part of it, which no scrubber recognises. The
// cost: no partial or resumed downloads from credential destinations.
func wholeOnly(rec *request.Record) {
	delete(rec.Header, "Range")
	delete(rec.Header, "If-Range")
}

// errPartial refuses a 206 answer from a credential destination (which
// should not send one once wholeOnly ran: a misbehaving upstream).
func errPartial() error {
	return wire.Errorf(egressdapi.CodeUpstreamError, "a partial answer (206) from a credential destination is not passed on: a held value could arrive in pieces")
}

// Sanitize is step 8: it decodes a gzip body (bounded; any other content
// coding is egress.response_undecodable), strips hop-by-hop headers, the
// headers named in Connection, the configured sensitive headers and
// egressd's reserved X-Hostkit-* headers, and scrubs every held value (the
// forms redact.Scrubber lists) from header values and the body. An answer
// that still holds one once text escapes are undone
// (redact.Scrubber.ContainsDecoded) is egress.upstream_error.
func (p *Pipeline) Sanitize(resp *http.Response, body []byte) (*Output, error) {
	body, err := p.decode(resp.Header.Values("Content-Encoding"), body)
	if err != nil {
		return nil, err
	}
	h := resp.Header
	var named map[string]bool // headers named in Connection
	for _, c := range h.Values("Connection") {
		for name := range strings.SplitSeq(c, ",") {
			if named == nil {
				named = map[string]bool{}
			}
			named[canonical(strings.TrimSpace(name))] = true
		}
	}
	sc := p.cfg.Registry.Scrubber()
	out := &Output{Status: resp.StatusCode, Body: sc.ScrubBytes(body)}
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	out.Header = make([]request.Field, 0, n)
	for k, vs := range h {
		if !hopByHopSet[k] && !named[k] && !p.strip[k] && !strings.HasPrefix(k, request.ReservedPrefix) && !p.heldInName(k) {
			for _, v := range vs {
				out.Header = append(out.Header, request.Field{Name: k, Value: sc.Scrub(v)})
			}
		}
	}
	// By name; a stable sort keeps the values of one name in their order.
	slices.SortStableFunc(out.Header, func(a, b request.Field) int { return strings.Compare(a.Name, b.Name) })
	// An echo in an escaped form the scrubber does not replace (\u
	// escapes of every kind, character references, partial percent-
	// encoding) cannot be cut out in place: the answer is refused whole.
	if sc.ContainsDecoded(out.Body) || slices.ContainsFunc(out.Header, func(f request.Field) bool { return sc.ContainsDecoded([]byte(f.Value)) }) {
		return nil, errEscapedEcho()
	}
	return out, nil
}

// errEscapedEcho refuses an answer that holds a held value in an escaped
// form Scrub cannot replace.
func errEscapedEcho() error {
	return wire.Errorf(egressdapi.CodeUpstreamError, "the answer holds a credential value in an escaped form that cannot be removed in place; it is not passed on")
}

// heldInName reports whether a response header name carries a held value:
// raw in any letter case (names arrive canonicalized), or an encoding the
// scrubber knows in lower or upper case. Such a header is dropped, since a
// name cannot be scrubbed in place.
func (p *Pipeline) heldInName(k string) bool {
	sc := p.cfg.Registry.Scrubber()
	if p.cfg.Registry.ContainsFold([]byte(k)) || sc.Contains([]byte(k)) {
		return true
	}
	var buf [64]byte // names are ASCII tokens, usually short: no allocation
	return sc.Contains(appendCase(buf[:0], k, unicode.ToLower)) || sc.Contains(appendCase(buf[:0], k, unicode.ToUpper))
}

// appendCase appends k mapped by to (as strings.Map would) to b.
func appendCase(b []byte, k string, to func(rune) rune) []byte {
	for _, r := range k {
		b = utf8.AppendRune(b, to(r))
	}
	return b
}

// decode undoes the response's content codings: every Content-Encoding
// line and every comma-separated coding counts (not only the first line),
// "identity" is no coding, and only a single gzip is decoded.
func (p *Pipeline) decode(lines []string, body []byte) ([]byte, error) {
	var codings []string
	for _, l := range lines {
		for c := range strings.SplitSeq(l, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	if len(codings) > 1 {
		return nil, wire.Errorf(egressdapi.CodeResponseUndecodable, "response content coding cannot be scanned")
	}
	enc := ""
	if len(codings) == 1 {
		enc = codings[0]
	}
	switch enc {
	case "", "identity":
		return body, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, wire.Wrap(egressdapi.CodeResponseUndecodable, "gzip response body does not decode", err)
		}
		out, err := io.ReadAll(io.LimitReader(zr, int64(p.cfg.MaxResponse)+1))
		if err != nil {
			return nil, wire.Wrap(egressdapi.CodeResponseUndecodable, "gzip response body does not decode", err)
		}
		if len(out) > p.cfg.MaxResponse {
			return nil, wire.Errorf(egressdapi.CodeResponseTooLarge, "decoded response body is larger than %d bytes", p.cfg.MaxResponse)
		}
		return out, nil
	}
	return nil, wire.Errorf(egressdapi.CodeResponseUndecodable, "response content coding cannot be scanned")
}
