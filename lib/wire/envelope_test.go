package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
)

var testID = []byte("0123456789abcdef")

// env builds a request-shaped map from key/encoded-value pairs, sorted
// bytewise, so each test states only the fields it changes.
type env map[string][]byte

func (e env) with(k string, v []byte) env {
	out := env{}
	for key, val := range e {
		out[key] = val
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

func (e env) encode() []byte {
	keys := slices.Sorted(mapsKeys(e))
	b := AppendMapHeader(nil, len(keys))
	for _, k := range keys {
		b = append(AppendStr(b, k), e[k]...)
	}
	return b
}

func str(s string) []byte   { return AppendStr(nil, s) }
func bin(p []byte) []byte   { return AppendBin(nil, p) }
func uintv(u uint64) []byte { return AppendUint(nil, u) }
func intv(i int64) []byte   { return AppendInt(nil, i) }

// baseReq is a valid request envelope with every field set.
var baseReq = env{
	"body":     m("n", 3, "name", "x"),
	"corr":     str("run-42.a_b"),
	"deadline": uintv(1764400000000),
	"id":       bin(testID),
	"idem":     str("key-1"),
	"op":       str("lease.stage"),
	"v":        uintv(1),
}

func TestRequestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  Request
	}{
		{name: "all fields", req: Request{ID: testID, Op: "lease.stage", Deadline: 1764400000000, Idem: strings.Repeat("k", MaxIdemLen), Corr: strings.Repeat("C", MaxCorrLen), Body: m("a", 1, "b", "two")}},
		{name: "minimal", req: Request{ID: testID, Op: "health", Deadline: 1}},
		{name: "negative deadline", req: Request{ID: testID, Op: "health", Deadline: -5}},
		{name: "zero deadline is present", req: Request{ID: testID, Op: "health", Deadline: 0}},
		{name: "op of 64 bytes", req: Request{ID: testID, Op: strings.Repeat("o", MaxOpLen), Deadline: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			enc := AppendRequest(nil, &tc.req)
			is.NoErr(Validate(enc, Limits{}))
			got, err := DecodeRequest(enc, Limits{})
			is.NoErr(err)
			is.Equal(*got, tc.req)
			is.Equal(AppendRequest(nil, got), enc) // stable
		})
	}
}

func TestRequestEncodingOmitsZeroFields(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	got := AppendRequest(nil, &Request{ID: testID, Op: "health", Deadline: 7, Body: []byte{0x80}})
	want := env{"deadline": uintv(7), "id": bin(testID), "op": str("health"), "v": uintv(1)}.encode()
	is.Equal(got, want) // no body, corr or idem; an empty body map is omitted
	// A nil id still encodes as an (empty) bin, so the field is present.
	is.Equal(AppendRequest(nil, &Request{Op: "health", Deadline: 7}), baseReq.with("body", nil).with("corr", nil).with("idem", nil).with("id", bin(nil)).with("deadline", uintv(7)).with("op", str("health")).encode())
}

func TestDecodeRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		in     []byte
		code   string // "" = accepted
		wantID []byte // the ID returned, also on error
		msg    string // a substring of the error message
	}{
		{name: "all fields", in: baseReq.encode(), wantID: testID},
		{name: "explicit empty body", in: baseReq.with("body", m()).encode(), wantID: testID},
		{name: "explicit empty idem and corr", in: baseReq.with("idem", str("")).with("corr", str("")).encode(), wantID: testID},
		{name: "health", in: baseReq.with("op", str("health")).encode(), wantID: testID},
		{name: "idem of 64 bytes", in: baseReq.with("idem", str(strings.Repeat("é", 32))).encode(), wantID: testID},
		{name: "corr of 64 bytes", in: baseReq.with("corr", str(strings.Repeat("aZ9._-", 10)+"abcd")).encode(), wantID: testID},

		{name: "version 2", in: baseReq.with("v", uintv(2)).encode(), code: CodeProtocolVersion, wantID: testID, msg: "[1]"},
		{name: "version 0", in: baseReq.with("v", uintv(0)).encode(), code: CodeProtocolVersion, wantID: testID},
		{name: "version 2 wins over an unknown field", in: baseReq.with("v", uintv(2)).with("zzz", uintv(1)).encode(), code: CodeProtocolVersion, wantID: testID},
		{name: "version 2 wins over an invalid op", in: baseReq.with("v", uintv(2)).with("op", nil).encode(), code: CodeProtocolVersion, wantID: testID},
		{name: "unknown field", in: baseReq.with("zzz", uintv(1)).encode(), code: CodeRequestUnknownField, wantID: testID, msg: `"zzz"`},
		{name: "unknown field sorted first", in: baseReq.with("a", uintv(1)).encode(), code: CodeRequestUnknownField, wantID: testID, msg: `"a"`},
		{name: "unknown field wins over a missing op", in: baseReq.with("op", nil).with("x", str("")).encode(), code: CodeRequestUnknownField, wantID: testID},
		{name: "missing op", in: baseReq.with("op", nil).encode(), code: CodeRequestInvalid, wantID: testID},
		{name: "empty op", in: baseReq.with("op", str("")).encode(), code: CodeRequestInvalid, wantID: testID},
		{name: "op of 65 bytes", in: baseReq.with("op", str(strings.Repeat("o", 65))).encode(), code: CodeRequestInvalid, wantID: testID},
		{name: "missing deadline", in: baseReq.with("deadline", nil).encode(), code: CodeRequestInvalid, wantID: testID, msg: "deadline"},
		{name: "idem of 65 bytes", in: baseReq.with("idem", str(strings.Repeat("k", 65))).encode(), code: CodeRequestInvalid, wantID: testID},
		{name: "corr of 65 bytes", in: baseReq.with("corr", str(strings.Repeat("c", 65))).encode(), code: CodeRequestInvalid, wantID: testID},
		{name: "corr with a space", in: baseReq.with("corr", str("a b")).encode(), code: CodeRequestInvalid, wantID: testID},
		{name: "corr with a slash", in: baseReq.with("corr", str("a/b")).encode(), code: CodeRequestInvalid, wantID: testID},
		{name: "corr with a newline", in: baseReq.with("corr", str("a\nb")).encode(), code: CodeRequestInvalid, wantID: testID},
		{name: "corr with a colon", in: baseReq.with("corr", str("a:b")).encode(), code: CodeRequestInvalid, wantID: testID},
		{name: "corr with non-ASCII", in: baseReq.with("corr", str("é")).encode(), code: CodeRequestInvalid, wantID: testID},

		{name: "id as str", in: baseReq.with("id", str(string(testID))).encode(), code: CodeFrameMalformed},
		{name: "id of 15 bytes", in: baseReq.with("id", bin(testID[:15])).encode(), code: CodeFrameMalformed},
		{name: "id of 17 bytes", in: baseReq.with("id", bin(append(testID, 0))).encode(), code: CodeFrameMalformed},
		{name: "empty id", in: baseReq.with("id", bin(nil)).encode(), code: CodeFrameMalformed},
		{name: "id absent", in: baseReq.with("id", nil).encode(), code: CodeFrameMalformed},
		{name: "id absent, version 2", in: baseReq.with("id", nil).with("v", uintv(2)).encode(), code: CodeFrameMalformed},
		{name: "v absent", in: baseReq.with("v", nil).encode(), code: CodeFrameMalformed},
		{name: "v negative", in: baseReq.with("v", intv(-1)).encode(), code: CodeFrameMalformed, wantID: testID},
		{name: "v as str", in: baseReq.with("v", str("1")).encode(), code: CodeFrameMalformed, wantID: testID},
		{name: "op as bin", in: baseReq.with("op", bin([]byte("health"))).encode(), code: CodeFrameMalformed, wantID: testID},
		{name: "deadline as str", in: baseReq.with("deadline", str("1")).encode(), code: CodeFrameMalformed, wantID: testID},
		{name: "deadline over int64", in: baseReq.with("deadline", uintv(1<<63)).encode(), code: CodeFrameMalformed, wantID: testID},
		{name: "idem as bin", in: baseReq.with("idem", bin([]byte("k"))).encode(), code: CodeFrameMalformed, wantID: testID},
		{name: "corr as int", in: baseReq.with("corr", uintv(1)).encode(), code: CodeFrameMalformed, wantID: testID},
		{name: "body as array", in: baseReq.with("body", arr()).encode(), code: CodeFrameMalformed, wantID: testID},
		{name: "body as str", in: baseReq.with("body", str("{}")).encode(), code: CodeFrameMalformed, wantID: testID},
		{name: "not a map", in: arr(str("v"), uintv(1)), code: CodeFrameMalformed},
		{name: "empty map", in: m(), code: CodeFrameMalformed},

		// Payloads that fail Validate still yield the id when it can be seen.
		{name: "malformed: trailing byte", in: append(baseReq.encode(), 0), code: CodeFrameMalformed, wantID: testID},
		{name: "malformed: non-minimal v", in: baseReq.with("v", []byte{0xcc, 1}).encode(), code: CodeFrameMalformed, wantID: testID},
		{name: "malformed: float in the body", in: baseReq.with("body", mustHex("81 a161 cb 3ff0000000000000")).encode(), code: CodeFrameMalformed, wantID: testID},
		{name: "malformed: unsorted keys", in: append(mustHex("82 a1 76 01"), append(str("id"), bin(testID)...)...), code: CodeFrameMalformed, wantID: testID},
		{name: "malformed: cut short", in: baseReq.encode()[:len(baseReq.encode())-3], code: CodeFrameMalformed, wantID: testID},
		{name: "malformed, no id", in: baseReq.with("id", nil).with("v", []byte{0xcc, 1}).encode(), code: CodeFrameMalformed},
		{name: "malformed, short id", in: baseReq.with("id", bin(testID[:8])).with("v", []byte{0xcc, 1}).encode(), code: CodeFrameMalformed},
		{name: "nothing", in: nil, code: CodeFrameMalformed},

		// Regression: an int64 overflow used to leave the cursor one value
		// ahead, so the next key read ran off the end (index out of range).
		{name: "deadline over int64 before a str-valued id", in: env{"deadline": uintv(1<<64 - 1), "id": str("v")}.encode(), code: CodeFrameMalformed},
		{name: "deadline over int64 before op v", in: env{"deadline": uintv(1<<64 - 1), "id": bin(testID), "op": str("v")}.encode(), code: CodeFrameMalformed, wantID: testID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			r, err := DecodeRequest(tc.in, Limits{})
			is.True(r != nil) // always a *Request, to echo the id
			is.True(bytes.Equal(r.ID, tc.wantID))
			if tc.code == "" {
				is.NoErr(err)
				return
			}
			is.True(err != nil)
			is.Equal(CodeOf(err), tc.code)
			is.True(strings.Contains(err.Error(), tc.msg))
		})
	}
}

func TestDecodeRequestFields(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r, err := DecodeRequest(baseReq.encode(), Limits{})
	is.NoErr(err)
	is.Equal(*r, Request{ID: testID, Op: "lease.stage", Deadline: 1764400000000, Idem: "key-1", Corr: "run-42.a_b", Body: m("n", 3, "name", "x")})
	r, err = DecodeRequest(baseReq.with("body", m()).with("deadline", intv(-1)).encode(), Limits{})
	is.NoErr(err)
	is.True(r.Body == nil) // an explicit empty body is the absent body
	is.Equal(r.Deadline, int64(-1))
}

func TestDecodeRequestLimits(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	deep := baseReq.with("body", m("a", nest(5, false, []byte{1}))).encode()
	_, err := DecodeRequest(deep, Limits{})
	is.NoErr(err)
	r, err := DecodeRequest(deep, Limits{MaxDepth: 4})
	is.Equal(CodeOf(err), CodeFrameMalformed)
	is.Equal(r.ID, testID) // salvaged
}

// resp builds a response envelope from key/encoded-value pairs.
var baseResp = env{"id": bin(testID), "ok": AppendBool(nil, true), "v": uintv(1)}

func TestDecodeResponse(t *testing.T) {
	t.Parallel()
	errMap := m("code", "peer.denied", "msg", "no", "retry", "never")
	for _, tc := range []struct {
		name string
		in   []byte
		code string
		want Response
	}{
		{name: "ok, no body", in: baseResp.encode(), want: Response{ID: testID, OK: true}},
		{name: "ok, body", in: baseResp.with("body", m("a", 1)).encode(), want: Response{ID: testID, OK: true, Body: m("a", 1)}},
		{name: "ok, explicit empty body", in: baseResp.with("body", m()).encode(), want: Response{ID: testID, OK: true}},
		{name: "error", in: baseResp.with("ok", AppendBool(nil, false)).with("err", errMap).encode(),
			want: Response{ID: testID, Err: &ErrorBody{Code: "peer.denied", Msg: "no", Retry: RetryNever}}},
		{name: "error, empty id", in: baseResp.with("ok", AppendBool(nil, false)).with("id", bin(nil)).with("err", errMap).encode(),
			want: Response{ID: []byte{}, Err: &ErrorBody{Code: "peer.denied", Msg: "no", Retry: RetryNever}}},
		{name: "unknown envelope fields are ignored", in: baseResp.with("aaa", arr(m("x", 1))).with("trace", str("t")).with("zz", uintv(9)).encode(),
			want: Response{ID: testID, OK: true}},
		{name: "unknown err fields are ignored", in: baseResp.with("ok", AppendBool(nil, false)).with("err", m("code", "x.y", "detail", m("n", 1), "hint", "h", "zz", arr())).encode(),
			want: Response{ID: testID, Err: &ErrorBody{Code: "x.y"}}},
		{name: "unknown retry value is kept", in: baseResp.with("ok", AppendBool(nil, false)).with("err", m("retry", "later")).encode(),
			want: Response{ID: testID, Err: &ErrorBody{Retry: "later"}}},

		{name: "version 2", in: baseResp.with("v", uintv(2)).encode(), code: CodeProtocolVersion},
		{name: "missing ok", in: baseResp.with("ok", nil).encode(), code: CodeFrameMalformed},
		{name: "missing id", in: baseResp.with("id", nil).encode(), code: CodeFrameMalformed},
		{name: "missing v", in: baseResp.with("v", nil).encode(), code: CodeFrameMalformed},
		{name: "ok as int", in: baseResp.with("ok", uintv(1)).encode(), code: CodeFrameMalformed},
		{name: "id as str", in: baseResp.with("id", str("x")).encode(), code: CodeFrameMalformed},
		{name: "err as str", in: baseResp.with("err", str("x")).encode(), code: CodeFrameMalformed},
		{name: "err code as bin", in: baseResp.with("err", m("code", bin([]byte("x")))).encode(), code: CodeFrameMalformed},
		{name: "err retry as int", in: baseResp.with("err", m("retry", 1)).encode(), code: CodeFrameMalformed},
		// Regression: a non-map body used to be accepted.
		{name: "body as str", in: baseResp.with("body", str("x")).encode(), code: CodeFrameMalformed},
		{name: "body as array", in: baseResp.with("body", arr()).encode(), code: CodeFrameMalformed},
		{name: "non-canonical", in: baseResp.with("v", []byte{0xcc, 1}).encode(), code: CodeFrameMalformed},
		{name: "not a map", in: arr(), code: CodeFrameMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			r, err := DecodeResponse(tc.in, Limits{})
			if tc.code != "" {
				is.Equal(CodeOf(err), tc.code)
				is.True(r == nil)
				return
			}
			is.NoErr(err)
			is.Equal(*r, tc.want)
		})
	}
}

func TestResponseRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		resp Response
	}{
		{name: "ok with body", resp: Response{ID: testID, OK: true, Body: m("a", 1)}},
		{name: "ok without body", resp: Response{ID: testID, OK: true}},
		{name: "error", resp: Response{ID: testID, Err: &ErrorBody{Code: CodePeerDenied, Msg: "peer is not allowed", Retry: RetryNever}}},
		{name: "error with empty id", resp: Response{ID: []byte{}, Err: &ErrorBody{Code: CodeFrameMalformed, Msg: "request could not be read", Retry: RetrySafe}}},
		{name: "error with only a code", resp: Response{ID: testID, Err: &ErrorBody{Code: CodeInternal}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			enc := AppendResponse(nil, &tc.resp)
			is.NoErr(Validate(enc, Limits{}))
			got, err := DecodeResponse(enc, Limits{})
			is.NoErr(err)
			is.Equal(*got, tc.resp)
			is.Equal(AppendResponse(nil, got), enc)
		})
	}
}

func TestAppendResponseDropsTheOtherHalf(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	// ok=true never carries err; ok=false never carries body; a nil id is an
	// empty bin (the field is always present).
	okResp := AppendResponse(nil, &Response{OK: true, Body: m("a", 1), Err: &ErrorBody{Code: "x"}})
	is.Equal(okResp, baseResp.with("id", bin(nil)).with("body", m("a", 1)).encode())
	failResp := AppendResponse(nil, &Response{ID: testID, Body: m("a", 1)})
	is.Equal(failResp, baseResp.with("ok", AppendBool(nil, false)).encode())
}

func TestErrorBodyToError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   ErrorBody
		want Error
	}{
		{name: "all fields", in: ErrorBody{Code: CodePeerDenied, Msg: "no", Retry: RetrySafe}, want: Error{Code: CodePeerDenied, Msg: "no", Retry: RetrySafe}},
		{name: "no code is internal", in: ErrorBody{Msg: "?"}, want: Error{Code: CodeInternal, Msg: "?"}},
		{name: "empty", in: ErrorBody{}, want: Error{Code: CodeInternal}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(*tc.in.ToError(), tc.want)
		})
	}
}

func TestErrorIdentity(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	cause := errors.New("open /secret/path: permission denied")
	e := Wrap(CodePeerDenied, "peer is not allowed", cause)
	wrapped := fmt.Errorf("rpc.serve: %w", e)

	is.True(errors.Is(wrapped, &Error{Code: CodePeerDenied}))      // matches by code through wrapping
	is.True(!errors.Is(wrapped, &Error{Code: CodeRequestInvalid})) // another code does not match
	is.True(errors.Is(wrapped, cause))                             // the cause stays reachable for logs
	is.True(errors.Is(Wrap(CodeFrameTruncated, "t", io.ErrUnexpectedEOF), io.ErrUnexpectedEOF))
	is.True(!errors.Is(errors.New("peer.denied"), &Error{Code: CodePeerDenied}))
	is.True(HasCode(wrapped, CodePeerDenied))
	is.True(!HasCode(nil, CodeInternal))

	is.Equal(e.Error(), "peer.denied: peer is not allowed") // never the cause
	is.Equal((&Error{Code: CodeServerBusy}).Error(), "server.busy")
	is.Equal(Errorf(CodeRequestInvalid, "op %q", "x").Retry, RetryNever)
	is.Equal(Errorf(CodeRequestInvalid, "op %q", "x").Msg, `op "x"`)
}

func TestCodeOfAndAsError(t *testing.T) {
	t.Parallel()
	secret := errors.New("dial tcp 10.0.0.7:443: token=hunter2 rejected")
	for _, tc := range []struct {
		name  string
		err   error
		code  string
		msg   string
		retry Retry
	}{
		{name: "nil", err: nil, code: ""},
		{name: "uncoded", err: secret, code: CodeInternal, msg: "internal error", retry: RetryAfterObserve},
		{name: "uncoded, wrapped", err: fmt.Errorf("x: %w", secret), code: CodeInternal, msg: "internal error", retry: RetryAfterObserve},
		{name: "coded", err: Wrap(CodeServerBusy, "busy", secret), code: CodeServerBusy, msg: "busy", retry: RetryNever},
		{name: "coded, wrapped", err: fmt.Errorf("a: %w", &Error{Code: CodeServerBusy, Msg: "busy", Retry: RetrySafe}), code: CodeServerBusy, msg: "busy", retry: RetrySafe},
		{name: "coded, no retry", err: &Error{Code: CodeStreamClosed}, code: CodeStreamClosed, retry: RetryNever},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(CodeOf(tc.err), tc.code)
			e := AsError(tc.err)
			if tc.err == nil {
				is.True(e == nil)
				return
			}
			is.Equal(e.Code, tc.code)
			is.Equal(e.Msg, tc.msg)
			is.Equal(e.Retry, tc.retry)
			// What would go on the wire carries no internal detail.
			wireForm := AppendResponse(nil, &Response{ID: testID, Err: &ErrorBody{Code: e.Code, Msg: e.Msg, Retry: e.Retry}})
			for _, leak := range []string{"hunter2", "10.0.0.7", "dial tcp"} {
				is.True(!strings.Contains(e.Error(), leak))
				is.True(!bytes.Contains(wireForm, []byte(leak)))
			}
			if errors.Is(tc.err, secret) {
				is.True(errors.Is(e, secret)) // the cause is kept for the log
			}
		})
	}
}

func TestAsErrorCopies(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	orig := &Error{Code: CodeServerBusy, Msg: "busy"}
	e := AsError(orig)
	e.Msg = "changed"
	is.Equal(orig.Msg, "busy") // the caller's error is not modified
	is.Equal(orig.Retry, Retry(""))
}

func TestCodesSortedUniqueDocumented(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.True(slices.IsSorted(Codes))
	is.Equal(len(slices.Compact(slices.Clone(Codes))), len(Codes))
	doc, err := os.ReadFile("../../docs/protocol.md")
	is.NoErr(err)
	for _, c := range Codes {
		if !bytes.Contains(doc, []byte("`"+c+"`")) {
			t.Errorf("docs/protocol.md does not list %s", c)
		}
	}
	for _, r := range []Retry{RetryNever, RetrySafe, RetryAfterObserve} {
		is.True(bytes.Contains(doc, []byte("`"+string(r)+"`")))
	}
}
