package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// The request head (request line, header fields, empty line) is checked
// as received, before net/http reads it: net/http accepts lines ended by
// a bare LF, joins folded lines, drops a Content-Length beside a
// Transfer-Encoding and removes the Host field, so none of those could be
// refused or scanned after it.

// head is what checkHead learns from a request head.
type head struct {
	host    []byte // the Host field's value (OWS trimmed); nil without one
	hasHost bool
	te      bool // a Transfer-Encoding field
}

// checkHead checks a request head (ending in CRLF CRLF) as RFC 9112
// requires of it, more strictly than net/http reads it: every line ends
// in CRLF (§2.2: no bare CR, no bare LF), no field line is folded (§5.2:
// obs-fold is refused), at most one Host field (§3.2), and no
// Content-Length beside Transfer-Encoding (§6.1: a proxy refuses what it
// cannot forward safely). Errors: egress.invalid_request (line endings,
// folding), egress.header_invalid (Host, framing).
func checkHead(b []byte) (head, error) {
	var h head
	cl := false
	for line, first := 0, true; line < len(b); first = false {
		end := bytes.IndexByte(b[line:], '\n')
		if end < 0 {
			return h, errBareCR() // checked by headEnd; kept for callers with other input
		}
		end += line
		if end == line || b[end-1] != '\r' {
			return h, errBareLF()
		}
		text := b[line : end-1]
		if bytes.IndexByte(text, '\r') >= 0 {
			return h, errBareCR()
		}
		line = end + 1
		if first || len(text) == 0 {
			continue // the request line (net/http checks it), or the end
		}
		if text[0] == ' ' || text[0] == '\t' {
			return h, wire.Errorf(egressdapi.CodeInvalidRequest, "a header field is folded over lines (obs-fold, RFC 9112 section 5.2)")
		}
		colon := bytes.IndexByte(text, ':')
		if colon < 0 {
			continue // net/http refuses it
		}
		name, value := text[:colon], bytes.Trim(text[colon+1:], " \t")
		switch {
		case asciiEqualFold(name, "host"):
			if h.hasHost {
				return h, wire.Errorf(egressdapi.CodeHeaderInvalid, "more than one Host header (RFC 9112 section 3.2)")
			}
			h.host, h.hasHost = value, true
		case asciiEqualFold(name, "content-length"):
			cl = true
		case asciiEqualFold(name, "transfer-encoding"):
			h.te = true
		}
	}
	if cl && h.te {
		return h, wire.Errorf(egressdapi.CodeHeaderInvalid, "Content-Length together with Transfer-Encoding")
	}
	return h, nil
}

// checkParsed applies what depends on the request as net/http read it:
// an HTTP/1.1 request needs a Host field (RFC 9112 section 3.2), and an
// HTTP/1.0 request may not use Transfer-Encoding (section 6.1: its
// framing is faulty). Errors: egress.header_invalid.
func (h head) checkParsed(req *http.Request) error {
	if req.ProtoAtLeast(1, 1) && !h.hasHost {
		return wire.Errorf(egressdapi.CodeHeaderInvalid, "an HTTP/1.1 request needs a Host header (RFC 9112 section 3.2)")
	}
	if !req.ProtoAtLeast(1, 1) && h.te {
		return wire.Errorf(egressdapi.CodeHeaderInvalid, "Transfer-Encoding in an HTTP/1.0 request")
	}
	return nil
}

func errBareLF() error {
	return wire.Errorf(egressdapi.CodeInvalidRequest, "a request line or header line ends in a bare LF (RFC 9112 section 2.2)")
}

func errBareCR() error {
	return wire.Errorf(egressdapi.CodeInvalidRequest, "a request line or header line holds a bare CR (RFC 9112 section 2.2)")
}

// asciiEqualFold reports whether b equals the lower-case ASCII s in any
// case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(s) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// headEnd returns the length of the head at the start of b (through its
// CRLF CRLF), or -1 when b does not hold all of it yet; it starts looking
// at from (a caller that peeks more and more need not read again what it
// read). A bare LF, or a CR followed by anything but LF, ends the search
// with an error: no more bytes could make the head valid.
func headEnd(b []byte, from int) (int, error) {
	for i := from; i < len(b); i++ {
		switch b[i] {
		case '\n':
			if i == 0 || b[i-1] != '\r' {
				return -1, errBareLF()
			}
			if i >= 3 && b[i-2] == '\n' && b[i-3] == '\r' {
				return i + 1, nil
			}
		case '\r':
			if i+1 < len(b) && b[i+1] != '\n' {
				return -1, errBareCR()
			}
		}
	}
	return -1, nil
}

// Errors of readHead besides checkHead's.
var (
	errHeadTooLarge = errors.New("request head too large")
	errHeadCut      = errors.New("connection ended inside the request head")
)

// readHead waits until c.br holds a whole request head, and checks it,
// without consuming it (http.ReadRequest reads it next). It reports
// whether a line had arrived (a refusal is then answered; before it, a
// connection that ends or times out is closed silently). The head may be
// larger than c.br's buffer: c.br then grows, doubling, to hold up to
// limit bytes.
// Errors: errHeadTooLarge (none within limit bytes), errHeadCut (EOF after
// some bytes), checkHead's and headEnd's, or the read error.
func (c *conn) readHead(limit int) (head, bool, error) {
	from := 0
	for want := 1; ; {
		// Everything already buffered, or one byte more than was there:
		// a head that arrived whole is read in one step.
		p, err := c.br.Peek(max(want, c.br.Buffered()))
		line := bytes.IndexByte(p, '\n') >= 0
		n, herr := headEnd(p, from)
		switch {
		case herr != nil:
			return head{}, true, herr
		case n >= 0:
			h, herr := checkHead(p[:n])
			return h, true, herr
		case len(p) >= limit:
			return head{}, true, errHeadTooLarge
		case errors.Is(err, bufio.ErrBufferFull):
			c.growReader(min(2*c.br.Size(), limit+4))
			continue
		case errors.Is(err, io.EOF) && len(p) > 0:
			return head{}, line, errHeadCut
		case err != nil:
			return head{}, line, err
		}
		from = max(0, len(p)-3)
		want = len(p) + 1
	}
}

// growReader replaces c.br with a reader of size bytes that first yields
// what c.br holds.
func (c *conn) growReader(size int) {
	held, _ := c.br.Peek(c.br.Buffered())
	old := c.br
	c.br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(bytes.Clone(held)), &c.ahead), size)
	c.s.bufs.putReader(old)
}
