package request

import (
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/wire"
)

// Field is one header field as the caller sent it.
type Field struct {
	Name, Value string // the field name (an RFC 9110 token) and its value, unchanged
}

// Limits caps what Parse accepts. Zero fields take the defaults.
type Limits struct {
	MaxURL         int // bytes; default 8 KiB
	MaxHeaders     int // fields; default 100
	MaxHeaderBytes int // names plus values; default 64 KiB
	MaxBody        int // bytes; default 4 MiB
}

func (l Limits) orDefault() Limits {
	if l.MaxURL <= 0 {
		l.MaxURL = 8 << 10
	}
	if l.MaxHeaders <= 0 {
		l.MaxHeaders = 100
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 64 << 10
	}
	if l.MaxBody <= 0 {
		l.MaxBody = 4 << 20
	}
	return l
}

// hopByHop are removed from every request (RFC 9110 §7.6.1), together with
// every header named in Connection, proxy credentials and Host (sent from
// the Record). Content-Length is recomputed from the body.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade", "Proxy-Authorization", "Proxy-Authenticate", "Host", "Content-Length"}

// ReservedPrefix marks egressd's own headers; callers and upstreams cannot
// set them.
const ReservedPrefix = "X-Hostkit-"

// Parse validates a request and returns its Record. Errors (*wire.Error):
// egress.method_forbidden (TRACE, TRACK, CONNECT), egress.invalid_request
// (bad method, URL or body length, userinfo, fragment), egress.header_invalid
// (CR, LF, NUL or another CTL in a name or value, a bad name, a Host that
// differs from the URL's authority, Content-Length with Transfer-Encoding,
// a transfer coding other than chunked), egress.too_large (over lim).
func Parse(method, rawURL string, fields []Field, body []byte, lim Limits) (*Record, error) {
	return (*Authorities)(nil).Parse(method, rawURL, fields, body, lim)
}

// Parse is request.Parse with authorities (the URL's and the Host
// field's) split through a.
func (a *Authorities) Parse(method, rawURL string, fields []Field, body []byte, lim Limits) (*Record, error) {
	lim = lim.orDefault()
	if err := checkMethod(method); err != nil {
		return nil, err
	}
	if len(rawURL) > lim.MaxURL {
		return nil, wire.Errorf(egressdapi.CodeTooLarge, "URL is longer than %d bytes", lim.MaxURL)
	}
	rec, err := parseURL(rawURL, a)
	if err != nil {
		return nil, err
	}
	rec.Method = method
	if len(body) > lim.MaxBody {
		return nil, wire.Errorf(egressdapi.CodeTooLarge, "body is larger than %d bytes", lim.MaxBody)
	}
	if rec.Header, err = parseHeader(rec, fields, len(body), lim, a); err != nil {
		return nil, err
	}
	rec.Body = body
	return rec, nil
}

func checkMethod(m string) error {
	if m == "" || len(m) > 32 || !isToken(m) {
		return wire.Errorf(egressdapi.CodeInvalidRequest, "method is not an HTTP token")
	}
	switch strings.ToUpper(m) {
	case "TRACE", "TRACK", "CONNECT":
		return wire.Errorf(egressdapi.CodeMethodForbidden, "method %s is not allowed", strings.ToUpper(m))
	}
	return nil
}

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if !httpguts.IsTokenRune(rune(s[i])) {
			return false
		}
	}
	return true
}

func parseHeader(rec *Record, fields []Field, bodyLen int, lim Limits, a *Authorities) (http.Header, error) {
	if len(fields) > lim.MaxHeaders {
		return nil, wire.Errorf(egressdapi.CodeTooLarge, "more than %d header fields", lim.MaxHeaders)
	}
	h, total := http.Header{}, 0
	for _, f := range fields {
		total += len(f.Name) + len(f.Value)
		if total > lim.MaxHeaderBytes {
			return nil, wire.Errorf(egressdapi.CodeTooLarge, "headers are larger than %d bytes", lim.MaxHeaderBytes)
		}
		if !httpguts.ValidHeaderFieldName(f.Name) {
			return nil, wire.Errorf(egressdapi.CodeHeaderInvalid, "a header name is not a token")
		}
		if !httpguts.ValidHeaderFieldValue(f.Value) {
			return nil, wire.Errorf(egressdapi.CodeHeaderInvalid, "header %s holds CR, LF, NUL or a control character", safeName(f.Name))
		}
		h.Add(f.Name, f.Value)
	}
	if err := checkHost(rec, h.Values("Host"), a); err != nil {
		return nil, err
	}
	if err := checkFraming(h, bodyLen); err != nil {
		return nil, err
	}
	for _, c := range h.Values("Connection") {
		for name := range strings.SplitSeq(c, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hopByHop {
		h.Del(name)
	}
	for name := range h {
		if strings.HasPrefix(name, ReservedPrefix) {
			delete(h, name)
		}
	}
	return h, nil
}

// checkHost accepts at most one Host field, equal (after canonicalization)
// to the URL's authority.
func checkHost(rec *Record, hosts []string, a *Authorities) error {
	if len(hosts) == 0 {
		return nil
	}
	if len(hosts) > 1 {
		return wire.Errorf(egressdapi.CodeHeaderInvalid, "more than one Host header")
	}
	host, port, err := a.SplitHostPort(hosts[0])
	if err != nil {
		return wire.Wrap(egressdapi.CodeHeaderInvalid, "Host header is not a valid authority", err)
	}
	if port == 0 {
		port = netguard.DefaultPort(rec.Scheme)
	}
	if host != rec.Host || port != rec.Port {
		return wire.Errorf(egressdapi.CodeHeaderInvalid, "Host header differs from the URL's authority")
	}
	return nil
}

// checkFraming refuses Content-Length with Transfer-Encoding (RFC 9112
// §6.3), a transfer coding other than chunked, and a Content-Length that
// is not the body's length.
func checkFraming(h http.Header, bodyLen int) error {
	cl, te := h.Values("Content-Length"), h.Values("Transfer-Encoding")
	if len(cl) > 0 && len(te) > 0 {
		return wire.Errorf(egressdapi.CodeHeaderInvalid, "Content-Length together with Transfer-Encoding")
	}
	for _, v := range te {
		if !strings.EqualFold(strings.TrimSpace(v), "chunked") {
			return wire.Errorf(egressdapi.CodeHeaderInvalid, "unsupported Transfer-Encoding")
		}
	}
	for _, v := range cl {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 63)
		if err != nil || n != uint64(bodyLen) {
			return wire.Errorf(egressdapi.CodeInvalidRequest, "Content-Length does not match the body")
		}
	}
	return nil
}

// safeName returns a header name for an error message (names are tokens,
// already validated, and short).
func safeName(n string) string {
	if len(n) > 64 {
		return n[:64] + "..."
	}
	return n
}
