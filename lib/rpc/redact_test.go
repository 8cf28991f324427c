package rpc

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// redactCase drives one failure path with the canary wherever the client
// can put it and returns every message the client was shown.
type redactCase struct {
	name string
	// fromHandler: the canary comes from handler code (an error text, a
	// panic value), not from the request; such text is logged for the
	// operator and the redacting handler is what keeps it out.
	fromHandler bool
	// loggedPath: the canary is an unknown field's name, whose path goes
	// to the log on purpose (rpc.unknown_field, docs/protocol.md): only
	// the redacting handler keeps it out of the log.
	loggedPath bool
	run        func(t *testing.T, h *harness) []string
}

// callMsg makes a call and returns its error message (which must be a
// failure).
func callMsg(t *testing.T, h *harness, ctx context.Context, op string, body any, opts ...CallOption) []string {
	t.Helper()
	err := h.client.Call(ctx, op, body, nil, opts...)
	if err == nil {
		return nil
	}
	return []string{err.Error(), fmt.Sprintf("%+v", err)}
}

// rawMsg sends payload on a fresh raw connection and returns the raw
// answer (as text) and its error message.
func rawMsg(t *testing.T, h *harness, frame []byte) []string {
	t.Helper()
	c := dialRaw(t, h.path)
	writeRaw(t, c, frame)
	p := readPayload(t, c)
	out := []string{string(p)}
	if r, err := wire.DecodeResponse(p, wire.Limits{}); err == nil && r.Err != nil {
		out = append(out, r.Err.Msg, r.Err.Code)
	}
	return out
}

func rawEnvelope(t *testing.T, h *harness, tamper func(m map[string]any)) []string {
	m := envelope("health")
	tamper(m)
	return rawMsg(t, h, wire.AppendFrame(nil, encode(t, m)))
}

func rawRequest(t *testing.T, h *harness, tamper func(r *wire.Request)) []string {
	r := req("test.echo")
	tamper(r)
	return rawMsg(t, h, wire.AppendFrame(nil, wire.AppendRequest(nil, r)))
}

var redactCases = []redactCase{
	{name: "unknown op", run: func(t *testing.T, h *harness) []string {
		return callMsg(t, h, t.Context(), canary, nil)
	}},
	{name: "unknown op with a dotted name", run: func(t *testing.T, h *harness) []string {
		return callMsg(t, h, t.Context(), "test."+canary, nil)
	}},
	{name: "op too long", run: func(t *testing.T, h *harness) []string {
		return callMsg(t, h, t.Context(), strings.Repeat(canary, 3), nil)
	}},
	{name: "op not str", run: func(t *testing.T, h *harness) []string {
		return rawEnvelope(t, h, func(m map[string]any) { m["op"] = []byte(canary) })
	}},
	{name: "op in version 2", run: func(t *testing.T, h *harness) []string {
		return rawEnvelope(t, h, func(m map[string]any) { m["v"], m["op"] = 2, canary })
	}},
	{name: "op with expired deadline", run: func(t *testing.T, h *harness) []string {
		return rawRequest(t, h, func(r *wire.Request) { r.Op, r.Deadline = canary, 1 })
	}},
	{name: "idem key conflict", run: func(t *testing.T, h *harness) []string {
		first := callMsg(t, h, t.Context(), "test.idem", &countBody{N: 1}, WithIdem(canary))
		return append(first, callMsg(t, h, t.Context(), "test.idem", &countBody{N: 2}, WithIdem(canary))...)
	}},
	{name: "idem key too long", run: func(t *testing.T, h *harness) []string {
		return callMsg(t, h, t.Context(), "test.idem", nil, WithIdem(strings.Repeat(canary, 3)))
	}},
	{name: "idem key not str", run: func(t *testing.T, h *harness) []string {
		return rawEnvelope(t, h, func(m map[string]any) { m["idem"] = []byte(canary) })
	}},
	{name: "idem key on a denied op", run: func(t *testing.T, h *harness) []string {
		return callMsg(t, h, t.Context(), "test.ops", nil, WithIdem(canary))
	}},
	{name: "corr with invalid chars", run: func(t *testing.T, h *harness) []string {
		return callMsg(t, h, WithCorr(t.Context(), canary+"!"), "test.echo", nil)
	}},
	{name: "corr with a space on an unknown op", run: func(t *testing.T, h *harness) []string {
		return callMsg(t, h, WithCorr(t.Context(), "x "+canary), canary, nil)
	}},
	{name: "corr too long", run: func(t *testing.T, h *harness) []string {
		return callMsg(t, h, WithCorr(t.Context(), strings.Repeat(canary, 3)), "health", nil)
	}},
	{name: "corr with invalid chars and an unknown field", run: func(t *testing.T, h *harness) []string {
		return rawEnvelope(t, h, func(m map[string]any) { m["corr"], m["zz"] = canary+"/", 1 })
	}},
	{name: "body field name", loggedPath: true, run: func(t *testing.T, h *harness) []string {
		return callMsg(t, h, t.Context(), "test.echo", map[string]any{canary: "x"})
	}},
	{name: "body field value of the wrong kind", run: func(t *testing.T, h *harness) []string {
		return callMsg(t, h, t.Context(), "test.echo", map[string]any{"msg": []byte(canary)})
	}},
	{name: "body map key with a value of the wrong kind", run: func(t *testing.T, h *harness) []string {
		return callMsg(t, h, t.Context(), "test.echo", map[string]any{"tags": map[string]any{canary: 1}})
	}},
	{name: "body values on a denied op", run: func(t *testing.T, h *harness) []string {
		return callMsg(t, h, t.Context(), "test.ops", map[string]any{canary: canary})
	}},
	{name: "body not a map", run: func(t *testing.T, h *harness) []string {
		return rawEnvelope(t, h, func(m map[string]any) { m["body"] = canary })
	}},
	{name: "unknown envelope field name", loggedPath: true, run: func(t *testing.T, h *harness) []string {
		return rawEnvelope(t, h, func(m map[string]any) { m[canary] = 1 })
	}},
	{name: "unknown envelope field value", run: func(t *testing.T, h *harness) []string {
		return rawEnvelope(t, h, func(m map[string]any) { m["zz"] = canary })
	}},
	{name: "id is the canary as str", run: func(t *testing.T, h *harness) []string {
		return rawEnvelope(t, h, func(m map[string]any) { m["id"] = canary })
	}},
	{name: "id is the canary as bin", run: func(t *testing.T, h *harness) []string {
		return rawEnvelope(t, h, func(m map[string]any) { m["id"] = []byte(canary) })
	}},
	{name: "frame of raw bytes", run: func(t *testing.T, h *harness) []string {
		return rawMsg(t, h, wire.AppendFrame(nil, []byte(canary)))
	}},
	{name: "frame holding a bare str", run: func(t *testing.T, h *harness) []string {
		return rawMsg(t, h, wire.AppendFrame(nil, wire.AppendStr(nil, canary)))
	}},
	{name: "non-canonical frame", run: func(t *testing.T, h *harness) []string {
		// fixmap with the canary as a key, then a non-shortest uint8.
		p := append(wire.AppendStr([]byte{0x81}, canary), 0xcc, 0x01)
		return rawMsg(t, h, wire.AppendFrame(nil, p))
	}},
	{name: "frame too large", run: func(t *testing.T, h *harness) []string {
		return rawMsg(t, h, append([]byte{0x7f, 0xff, 0xff, 0xff}, canary...))
	}},
	{name: "handler error text", fromHandler: true, run: func(t *testing.T, h *harness) []string {
		return callMsg(t, h, t.Context(), "test.internal", nil)
	}},
	{name: "handler panic", fromHandler: true, run: func(t *testing.T, h *harness) []string {
		return callMsg(t, h, t.Context(), "test.panic", nil)
	}},
	{name: "stream error text", fromHandler: true, run: func(t *testing.T, h *harness) []string {
		st, err := h.client.OpenStream(t.Context(), "test.stream", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		st.Conn().SetDeadline(time.Now().Add(5 * time.Second))
		st.Send(&wire.StreamFrame{T: wire.StreamData, B: []byte("boom")})
		f, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return []string{f.Code, f.Msg}
	}},
}

// TestRedaction drives every failure path with the canary and checks that
// it never reaches a log line, an audit event or a message to the client.
// With the redacting handler nothing may leak; with a plain JSON handler,
// nothing that came from the request may leak either (the rpc layer must
// not log the caller's input; the redacting handler is a backstop) but
// an unknown field's path, which is logged for the operator on purpose,
// through the redacting handler every daemon logs with.
func TestRedaction(t *testing.T) {
	t.Parallel()
	for _, plain := range []bool{false, true} {
		t.Run(fmt.Sprintf("plain=%v", plain), func(t *testing.T) {
			t.Parallel()
			for _, tt := range redactCases {
				if plain && tt.fromHandler {
					continue
				}
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					is := is.New(t)
					h := start(t, options{plainLog: plain})
					msgs := tt.run(t, h)
					is.True(len(msgs) > 0) // the path failed and answered
					// A peer without any role takes the denial path with
					// the same input.
					denied := start(t, options{plainLog: plain, cfg: func(c *Config) { c.Roles = Roles{roleAdmin: {4242}} }})
					if !tt.fromHandler {
						msgs = append(msgs, tt.run(t, denied)...)
					}
					h.stop(t)
					denied.stop(t)
					for _, m := range msgs {
						if l := leaks(m); len(l) > 0 {
							t.Errorf("client saw the canary: %q", m)
						}
					}
					for _, hh := range []*harness{h, denied} {
						if l := leaks(hh.logs.String()); len(l) > 0 && !(plain && tt.loggedPath) {
							t.Errorf("log holds the canary:\n%s", hh.logs.String())
						}
						for _, e := range hh.events.all() {
							if l := leaks(fmt.Sprintf("%+v", e)); len(l) > 0 {
								t.Errorf("audit event holds the canary: %+v", e)
							}
						}
					}
				})
			}
		})
	}
}

// TestRedactionControl shows the scan can see the canary: a well-formed
// corr is, by design, copied into logs and audit events, so a plain logger
// holds it and the redacting one does not.
func TestRedactionControl(t *testing.T) {
	t.Parallel()
	for _, plain := range []bool{false, true} {
		t.Run(fmt.Sprintf("plain=%v", plain), func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			h := start(t, options{plainLog: plain})
			asWire(t, h.client.Call(WithCorr(t.Context(), canary), "test.ops", nil, nil), wire.CodePeerDenied)
			h.stop(t)
			is.Equal(len(leaks(h.logs.String())) > 0, plain)
			evs := h.events.find(wire.CodePeerDenied)
			is.Equal(len(evs), 1)
			is.Equal(evs[0].Corr, canary)
		})
	}
}

// TestUnknownFieldLogged: an unknown field's path is named in the
// daemon's log only (rpc.unknown_field), redacted there when it holds a
// held value, and never in the answer, whose message is generic; in the
// body and in the envelope.
func TestUnknownFieldLogged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		run    func(t *testing.T, h *harness) []string
		logged string // the field as the log names it
	}{
		{"body, a plain name", func(t *testing.T, h *harness) []string {
			return callMsg(t, h, t.Context(), "test.echo", map[string]any{"zzfield": 1})
		}, `"field":"body.zzfield"`},
		{"body, the canary as the name", func(t *testing.T, h *harness) []string {
			return callMsg(t, h, t.Context(), "test.echo", map[string]any{canary: 1})
		}, `"field":"body.` + redact.Redacted + `"`},
		{"envelope, a plain name", func(t *testing.T, h *harness) []string {
			return rawEnvelope(t, h, func(m map[string]any) { m["zzfield"] = 1 })
		}, `"field":"envelope.zzfield"`},
		{"envelope, the canary as the name", func(t *testing.T, h *harness) []string {
			return rawEnvelope(t, h, func(m map[string]any) { m[canary] = 1 })
		}, `"field":"envelope.` + redact.Redacted + `"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			h := start(t, options{})
			msgs := tc.run(t, h)
			h.stop(t)
			is.True(len(msgs) > 0)
			for _, m := range msgs {
				is.True(!strings.Contains(m, "zzfield")) // the answer names no field
				is.True(len(leaks(m)) == 0)              // nor the canary
			}
			logs := h.logs.String()
			is.True(strings.Contains(logs, `"msg":"rpc.unknown_field"`))
			is.True(strings.Contains(logs, tc.logged)) // the path, redacted or safe
			is.True(len(leaks(logs)) == 0)
			for _, e := range h.events.all() {
				is.True(!strings.Contains(fmt.Sprintf("%+v", e), "zzfield")) // audit events name no field
			}
		})
	}
}
