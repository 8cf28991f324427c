package pipeline

import (
	"bytes"
	"context"
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
// response as soon as its header has arrived; the body streams. rec is
// the record as sent, owned by this request: the default User-Agent is
// added to its header in place (RequestBytes counts it already).
// Redirects are returned, not followed. upgrade is Input.Upgrade.
// Errors: egress.timeout, egress.upstream_error.
func (p *Pipeline) Send(ctx context.Context, rec *request.Record, r transport.Route, upgrade string) (*http.Response, error) {
	req := p.newRequest(rec, upgrade)
	if len(rec.Body) > 0 {
		body := rec.Body
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return p.cfg.Transport.RoundTripContext(ctx, req, rec.OriginString(), r)
}

// newRequest is rec as the transport sends it, without a body beyond
// rec's length (Send's and sendUpload's).
func (p *Pipeline) newRequest(rec *request.Record, upgrade string) *http.Request {
	h := rec.Header
	if h == nil {
		h = http.Header{}
		rec.Header = h
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{p.cfg.UserAgent}
	}
	// The body was read whole: a client's Expect was answered by egressd
	// (or needs no answer) and is not the upstream's to answer.
	delete(h, "Expect")
	if upgrade != "" {
		// request.Parse removed the client's hop-by-hop fields; the
		// upgrade egressd relays is its own.
		delete(h, "Sec-Websocket-Extensions")
		h["Connection"] = []string{"Upgrade"}
		h["Upgrade"] = []string{upgrade}
	}
	return &http.Request{
		Method: rec.Method, URL: rec.URL(), Header: h, Host: rec.Authority(),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: int64(len(rec.Body)),
	}
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

// sanitizeHeader is step 8 for the answer's header, before any of its
// body is passed on: it checks the content coding (a single gzip is
// decoded as the body streams, any other is egress.response_undecodable)
// and sanitizes the fields (SanitizeFields); a field that still holds an
// echo once escapes are undone refuses the whole answer
// (egress.upstream_error).
func (st *Stream) sanitizeHeader() error {
	h := st.resp.Header
	gz, err := gzipped(h.Values("Content-Encoding"))
	if err != nil {
		return err
	}
	st.gz = gz
	out, err := st.p.SanitizeFields(h)
	if err != nil {
		return err
	}
	st.Header = out
	return nil
}

// sanitizeTrailer sanitizes the upstream's trailer fields (RFC 9110
// section 6.5) as the header's; an echo aborts the answer.
func (st *Stream) sanitizeTrailer() error {
	if len(st.resp.Trailer) == 0 {
		return nil
	}
	out, err := st.p.SanitizeFields(st.resp.Trailer)
	if err != nil {
		return errEcho()
	}
	// The body is scrubbed with the values held when its header arrived,
	// fields with those held now: once the bundle was dropped (checked
	// after the scrub, since its values are unregistered after Dropped
	// is closed) the trailer may have been scrubbed without them.
	select {
	case <-st.b.Dropped():
		return wire.Errorf(egressdapi.CodeBundleUnknown, "the invocation's bundle was dropped during the answer; its trailer is not passed on")
	default:
	}
	st.trailer = out
	return nil
}

// SanitizeFields is step 8 for header or trailer fields: it drops the
// hop-by-hop and framing fields, those named in Connection, the
// configured sensitive fields, egressd's reserved X-Hostkit-* fields and
// any whose name holds a held value, and scrubs every held value (the
// forms redact.Scrubber lists) from the values. The result is sorted by
// name, the values of one name in their order. A value that still holds
// one once text escapes are undone (redact.Scrubber.ContainsDecoded) is
// egress.upstream_error: it cannot be cut out in place.
func (p *Pipeline) SanitizeFields(h http.Header) ([]request.Field, error) {
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
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	out := make([]request.Field, 0, n)
	for k, vs := range h {
		if !hopByHopSet[k] && !named[k] && !p.strip[k] && !strings.HasPrefix(k, request.ReservedPrefix) && !p.heldInName(k) {
			for _, v := range vs {
				out = append(out, request.Field{Name: k, Value: sc.ScrubField(v)})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b request.Field) int { return strings.Compare(a.Name, b.Name) })
	if slices.ContainsFunc(out, func(f request.Field) bool { return sc.ContainsDecoded([]byte(f.Value)) }) {
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

// gzipped reads the response's content codings: every Content-Encoding
// line and every comma-separated coding counts (not only the first
// line), "identity" is no coding, and only a single gzip is decoded
// (true); anything else is egress.response_undecodable.
func gzipped(lines []string) (bool, error) {
	var codings []string
	for _, l := range lines {
		for c := range strings.SplitSeq(l, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	switch {
	case len(codings) == 0:
		return false, nil
	case len(codings) == 1 && (codings[0] == "gzip" || codings[0] == "x-gzip"):
		return true, nil
	}
	return false, wire.Errorf(egressdapi.CodeResponseUndecodable, "response content coding cannot be scanned")
}
