package rpc

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

// checkedBody is test.checked's request: its Validate refuses a negative
// N with a code of its own, an N past 100 without a code (holding the
// canary, which must not reach the peer), and Name "fail" is left to the
// op's function, which refuses it.
type checkedBody struct {
	N    int64  `msgpack:"n,omitempty"`
	Name string `msgpack:"name,omitempty"`
}

// codeTestNegative is the code checkedBody.Validate gives a negative N.
const codeTestNegative = "test.negative"

func (b *checkedBody) Validate() error {
	switch {
	case b.N < 0:
		return wire.Errorf(codeTestNegative, "n must not be negative")
	case b.N > 100:
		return errors.New("n is too large near " + canary)
	}
	return nil
}

// checkedOp is test.checked, served through Handle; calls counts the
// times its function ran.
func checkedOp(calls *atomic.Int64) Op {
	return Op{Name: "test.checked", Roles: []Role{roleAdmin}, Handler: Handle(func(_ context.Context, _ *Call, req *checkedBody) (*checkedBody, error) {
		calls.Add(1)
		if req.Name == "fail" {
			return req, wire.Errorf("test.refused", "the op refused")
		}
		return req, nil
	})}
}

// TestHandle sends test.checked requests over a real socket, so the body
// arrives as the envelope decoder hands it to a handler, and checks the
// answer's code and whether the op's function ran.
func TestHandle(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	h := start(t, options{ops: []Op{checkedOp(&calls)}})
	withBody := func(body any) []byte {
		env := envelope("test.checked")
		if body != nil {
			env["body"] = body
		}
		return encode(t, env)
	}
	for _, tc := range []struct {
		name    string
		payload []byte
		code    string // "" = answered OK
		want    checkedBody
		ran     bool // the op's function ran
	}{
		{name: "valid body", payload: withBody(map[string]any{"n": 7, "name": "x"}), want: checkedBody{N: 7, Name: "x"}, ran: true},
		{name: "no body", payload: withBody(nil), ran: true},
		{name: "unknown field", payload: withBody(map[string]any{"n": 1, "zz": canary}), code: wire.CodeRequestUnknownField},
		{name: "trailing bytes", payload: append(withBody(map[string]any{"n": 1}), 0x01), code: wire.CodeFrameMalformed},
		{name: "wrong type", payload: withBody(map[string]any{"n": "seven"}), code: wire.CodeFrameMalformed},
		{name: "body not a map", payload: withBody([]any{1, 2}), code: wire.CodeFrameMalformed},
		{name: "validate refusal with a code", payload: withBody(map[string]any{"n": -1}), code: codeTestNegative},
		{name: "validate refusal without a code", payload: withBody(map[string]any{"n": 101}), code: wire.CodeRequestInvalid},
		{name: "op refusal", payload: withBody(map[string]any{"name": "fail"}), code: "test.refused", ran: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			before := calls.Load()
			c := dialRaw(t, h.path)
			sendPayload(t, c, tc.payload)
			r := readResp(t, c)
			is.Equal(errCode(r), tc.code)              // the answer's code
			is.Equal(calls.Load()-before == 1, tc.ran) // whether the op's function ran
			if tc.code != "" {
				is.True(r.Body == nil)                        // a refusal carries no body
				is.True(!strings.Contains(r.Err.Msg, canary)) // the message quotes no input
				return
			}
			var got checkedBody
			is.NoErr(wire.Unmarshal(r.Body, &got, true))
			is.Equal(got, tc.want)
		})
	}
	is.New(t).Equal(leaks(h.logs.String()), []string(nil)) // no log line holds the canary
}

// TestDecode checks the pieces Handle is made of, on a Call built by hand:
// a refusal still returns the request (for a caller that wipes it), an
// uncoded Validate error keeps its cause for the log, and a type without
// Validate is only decoded.
func TestDecode(t *testing.T) {
	t.Parallel()
	body := func(v any) []byte {
		b, err := wire.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		body []byte
		code string
		want checkedBody
	}{
		{name: "valid", body: body(&checkedBody{N: 3}), want: checkedBody{N: 3}},
		{name: "empty body", body: nil},
		{name: "validate refusal keeps the request", body: body(&checkedBody{N: -2, Name: "a"}), code: codeTestNegative, want: checkedBody{N: -2, Name: "a"}},
		{name: "uncoded refusal", body: body(&checkedBody{N: 500}), code: wire.CodeRequestInvalid, want: checkedBody{N: 500}},
		{name: "unknown field", body: body(map[string]any{"zz": 1}), code: wire.CodeRequestUnknownField},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			req, err := Decode[checkedBody](&Call{Body: tc.body})
			is.Equal(wire.CodeOf(err), tc.code)
			is.True(req != nil) // never nil, even after a refusal
			is.Equal(*req, tc.want)
			if tc.code == wire.CodeRequestInvalid {
				is.True(strings.Contains(errors.Unwrap(err).Error(), "too large")) // the cause stays wrapped for the log
				is.True(!strings.Contains(wire.AsError(err).Msg, canary))          // the peer's message holds none of it
			}
		})
	}
	t.Run("no Validate method", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		req, err := Decode[echoBody](&Call{Body: body(&echoBody{N: -5})})
		is.NoErr(err)
		is.Equal(req.N, int64(-5))
	})
}

// BenchmarkHandle compares a Handle op with the same op written with the
// prologue it replaces (decode by hand, then check), called directly on
// a Call that holds a typical body: what Handle adds per call.
func BenchmarkHandle(b *testing.B) {
	body, err := wire.Marshal(&checkedBody{N: 42, Name: "inv-0123456789"})
	if err != nil {
		b.Fatal(err)
	}
	fn := func(_ context.Context, _ *Call, req *checkedBody) (*countBody, error) {
		return &countBody{N: req.N}, nil
	}
	handwritten := func(ctx context.Context, call *Call) (any, error) {
		var req checkedBody
		if err := call.Decode(&req); err != nil {
			return nil, err
		}
		if err := req.Validate(); err != nil {
			return nil, err
		}
		return fn(ctx, call, &req)
	}
	for _, bc := range []struct {
		name string
		h    Handler
	}{
		{"prologue", handwritten},
		{"Handle", Handle(fn)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			call := &Call{Op: "test.checked", Body: body}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.h(ctx, call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestHandleNilAnswerIsNoAnswer: a handler that returns a nil pointer
// (a stream op whose stream carries the answer) yields a nil any, not an
// any holding a nil pointer, which the server would take for an answer.
func TestHandleNilAnswerIsNoAnswer(t *testing.T) {
	is := is.New(t)
	type answer struct{ N int }
	h := Handle(func(context.Context, *Call, *struct{}) (*answer, error) { return nil, nil })
	got, err := h(context.Background(), &Call{})
	is.NoErr(err)
	is.True(got == nil)
	h = Handle(func(context.Context, *Call, *struct{}) (*answer, error) { return &answer{N: 1}, nil })
	got, err = h(context.Background(), &Call{})
	is.NoErr(err)
	is.Equal(got, &answer{N: 1})
}
