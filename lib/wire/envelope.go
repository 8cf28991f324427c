package wire

import "strconv"

// Version is the protocol version this package speaks. Servers answer any
// other `v` with protocol.version_unsupported naming Versions.
const Version = 1

// Versions lists the protocol versions served, for the
// protocol.version_unsupported message.
var Versions = []int{Version}

// IDLen is the length of a request id in bytes (16 random bytes).
const IDLen = 16

// Limits on envelope strings, in bytes (docs/protocol.md, "Request envelope").
const (
	MaxIdemLen = 64
	MaxCorrLen = 64
	MaxOpLen   = 64
)

// Request is the request envelope (docs/protocol.md, "Request envelope").
// Body holds the op's body as canonical MessagePack (a map), or nil when
// absent or empty.
type Request struct {
	ID       []byte // 16 bytes
	Op       string // `area.verb`, or `health`
	Deadline int64  // Unix milliseconds; required
	Idem     string // idempotency key, at most 64 bytes; "" = none
	Corr     string // correlation id, at most 64 bytes of [A-Za-z0-9._-]; "" = none
	Body     []byte // canonical MessagePack map; nil = empty
}

// ErrorBody is the `err` map of a failed response.
type ErrorBody struct {
	Code  string // the stable `area.reason` code (docs/protocol.md, "Error codes")
	Msg   string // a human sentence, already redacted
	Retry Retry  // never, safe or after_observe
}

// Response is the response envelope. Exactly one of Body (on OK) or Err (on
// failure) is meaningful. ID is the request's id, or empty when it could not
// be read.
type Response struct {
	ID   []byte     // the request's 16-byte id; empty when it could not be read
	OK   bool       // true on success
	Body []byte     // canonical MessagePack map; nil = empty
	Err  *ErrorBody // set when OK is false
}

// AppendRequest appends the canonical encoding of r (keys in bytewise
// order: body, corr, deadline, id, idem, op, v; zero fields omitted except
// v, id).
func AppendRequest(b []byte, r *Request) []byte {
	n := 4 // deadline, id, op, v
	body := nonEmptyMap(r.Body)
	if body != nil {
		n++
	}
	if r.Corr != "" {
		n++
	}
	if r.Idem != "" {
		n++
	}
	b = AppendMapHeader(b, n)
	if body != nil {
		b = append(AppendStr(b, "body"), body...)
	}
	if r.Corr != "" {
		b = AppendStr(AppendStr(b, "corr"), r.Corr)
	}
	b = AppendInt(AppendStr(b, "deadline"), r.Deadline)
	b = AppendBin(AppendStr(b, "id"), r.ID)
	if r.Idem != "" {
		b = AppendStr(AppendStr(b, "idem"), r.Idem)
	}
	b = AppendStr(AppendStr(b, "op"), r.Op)
	return AppendUint(AppendStr(b, "v"), Version)
}

// AppendResponse appends the canonical encoding of r (keys: body, err, id,
// ok, v; ok and id always present, an empty id as an empty bin).
func AppendResponse(b []byte, r *Response) []byte {
	n := 3
	body := nonEmptyMap(r.Body)
	if r.OK && body != nil {
		n++
	}
	if !r.OK && r.Err != nil {
		n++
	}
	b = AppendMapHeader(b, n)
	if r.OK && body != nil {
		b = append(AppendStr(b, "body"), body...)
	}
	if !r.OK && r.Err != nil {
		b = appendErr(AppendStr(b, "err"), r.Err)
	}
	b = AppendBin(AppendStr(b, "id"), r.ID)
	b = AppendBool(AppendStr(b, "ok"), r.OK)
	return AppendUint(AppendStr(b, "v"), Version)
}

func appendErr(b []byte, e *ErrorBody) []byte {
	n := 0
	for _, s := range []string{e.Code, e.Msg, string(e.Retry)} {
		if s != "" {
			n++
		}
	}
	b = AppendMapHeader(b, n)
	if e.Code != "" {
		b = AppendStr(AppendStr(b, "code"), e.Code)
	}
	if e.Msg != "" {
		b = AppendStr(AppendStr(b, "msg"), e.Msg)
	}
	if e.Retry != "" {
		b = AppendStr(AppendStr(b, "retry"), string(e.Retry))
	}
	return b
}

// nonEmptyMap returns body unless it is an empty map (80) or empty, which
// the encoder omits.
func nonEmptyMap(body []byte) []byte {
	if len(body) == 0 || (len(body) == 1 && body[0] == 0x80) {
		return nil
	}
	return body
}

// DecodeRequest decodes and checks a request payload. On error it still
// returns a *Request whose ID is set when the id could be read (so the
// server can echo it) and empty otherwise. Errors, in order of precedence:
// frame.malformed (non-canonical, wrong types, missing v or id, id not 16
// bytes), protocol.version_unsupported, request.unknown_field,
// request.invalid (missing op or deadline, over-long idem/corr/op, bad corr
// characters). The returned slices alias payload.
func DecodeRequest(payload []byte, lim Limits) (*Request, error) {
	r := &Request{}
	if err := Validate(payload, lim); err != nil {
		r.ID = salvageID(payload)
		return r, err
	}
	c := cursor{b: payload}
	n, ok := c.mapLen()
	if !ok {
		return r, Errorf(CodeFrameMalformed, "request is not a map")
	}
	var (
		version             uint64
		haveV, haveDeadline bool
		unknown, malformed  string
	)
	for i := 0; i < n; i++ {
		key, _ := c.strBytes()
		switch string(key) {
		case "v":
			version, haveV = c.uint()
			if !haveV {
				malformed = "v is not a non-negative integer"
				c.skip()
			}
		case "id":
			id, ok := c.binBytes()
			switch {
			case !ok:
				malformed = "id is not bin"
				c.skip()
			case len(id) != IDLen:
				malformed = "id is not " + strconv.Itoa(IDLen) + " bytes"
			default:
				r.ID = id
			}
		case "op":
			op, ok := c.strBytes()
			if !ok {
				malformed = "op is not str"
				c.skip()
			}
			r.Op = string(op)
		case "deadline":
			d, ok := c.int()
			if !ok {
				malformed = "deadline is not an integer"
				c.skip()
			}
			r.Deadline, haveDeadline = d, ok
		case "idem":
			s, ok := c.strBytes()
			if !ok {
				malformed = "idem is not str"
				c.skip()
			}
			r.Idem = string(s)
		case "corr":
			s, ok := c.strBytes()
			if !ok {
				malformed = "corr is not str"
				c.skip()
			}
			r.Corr = string(s)
		case "body":
			isMap := isMapHeader(c.peek())
			raw := c.skip()
			if !isMap {
				malformed = "body is not a map"
				break
			}
			r.Body = nonEmptyMap(raw)
		default:
			if unknown == "" {
				unknown = string(key)
			}
			c.skip()
		}
	}
	switch {
	case malformed != "":
		return r, Errorf(CodeFrameMalformed, "%s", malformed)
	case !haveV || r.ID == nil:
		r.ID = nil
		return r, Errorf(CodeFrameMalformed, "request lacks v or id")
	case version != Version:
		return r, Errorf(CodeProtocolVersion, "protocol version %d is not supported; this server speaks %v", version, Versions)
	case unknown != "":
		return r, Errorf(CodeRequestUnknownField, "unknown request field %q", truncate(unknown, 64))
	case r.Op == "" || len(r.Op) > MaxOpLen:
		return r, Errorf(CodeRequestInvalid, "op is missing or longer than %d bytes", MaxOpLen)
	case !haveDeadline:
		return r, Errorf(CodeRequestInvalid, "deadline is missing")
	case len(r.Idem) > MaxIdemLen:
		return r, Errorf(CodeRequestInvalid, "idem is longer than %d bytes", MaxIdemLen)
	case len(r.Corr) > MaxCorrLen || !validCorr(r.Corr):
		return r, Errorf(CodeRequestInvalid, "corr must be at most %d bytes of [A-Za-z0-9._-]", MaxCorrLen)
	}
	return r, nil
}

func isMapHeader(t byte) bool { return (t >= 0x80 && t <= 0x8f) || t == 0xde || t == 0xdf }

// salvageID looks for a 16-byte bin under the top-level key "id" in a
// payload that failed validation, scanning leniently; nil when none is found.
func salvageID(payload []byte) []byte {
	key := []byte{0xa2, 'i', 'd', 0xc4, IDLen}
	for i := 0; i+len(key)+IDLen <= len(payload); i++ {
		if string(payload[i:i+len(key)]) == string(key) {
			// Only trust it if it is at a plausible top-level position: the
			// first key after a map header, or after another value. A
			// lenient guess is fine here: it only labels an error answer.
			return payload[i+len(key) : i+len(key)+IDLen]
		}
	}
	return nil
}

func validCorr(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// DecodeResponse decodes a response payload. Unknown fields, in the
// envelope and in `err`, are ignored (a daemon may add response fields).
// Errors: frame.malformed for non-canonical input, wrong types, or a missing
// v, id or ok; protocol.version_unsupported for another v. Slices alias
// payload.
func DecodeResponse(payload []byte, lim Limits) (*Response, error) {
	if err := Validate(payload, lim); err != nil {
		return nil, err
	}
	c := cursor{b: payload}
	n, ok := c.mapLen()
	if !ok {
		return nil, Errorf(CodeFrameMalformed, "response is not a map")
	}
	r := &Response{}
	var version uint64
	var haveV, haveID, haveOK bool
	for i := 0; i < n; i++ {
		key, _ := c.strBytes()
		var good = true
		switch string(key) {
		case "v":
			version, haveV = c.uint()
			good = haveV
		case "id":
			r.ID, haveID = c.binBytes()
			good = haveID
		case "ok":
			r.OK, haveOK = c.bool()
			good = haveOK
		case "body":
			good = isMapHeader(c.peek())
			r.Body = nonEmptyMap(c.skip())
		case "err":
			e, ok := decodeErr(&c)
			r.Err, good = e, ok
		default:
			c.skip()
		}
		if !good {
			return nil, Errorf(CodeFrameMalformed, "response field %q has the wrong type", truncate(string(key), 64))
		}
	}
	switch {
	case !haveV || !haveID || !haveOK:
		return nil, Errorf(CodeFrameMalformed, "response lacks v, id or ok")
	case version != Version:
		return nil, Errorf(CodeProtocolVersion, "response has protocol version %d", version)
	}
	return r, nil
}

func decodeErr(c *cursor) (*ErrorBody, bool) {
	n, ok := c.mapLen()
	if !ok {
		return nil, false
	}
	e := &ErrorBody{}
	for i := 0; i < n; i++ {
		key, _ := c.strBytes()
		var dst *string
		switch string(key) {
		case "code":
			dst = &e.Code
		case "msg":
			dst = &e.Msg
		case "retry":
			s, ok := c.strBytes()
			if !ok {
				return nil, false
			}
			e.Retry = Retry(s)
			continue
		default:
			c.skip()
			continue
		}
		s, ok := c.strBytes()
		if !ok {
			return nil, false
		}
		*dst = string(s)
	}
	return e, true
}

// ToError converts a failed response's err map into an *Error (code
// `internal` when the server sent none).
func (e *ErrorBody) ToError() *Error {
	code := e.Code
	if code == "" {
		code = CodeInternal
	}
	return &Error{Code: code, Msg: e.Msg, Retry: e.Retry}
}
