package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the seed corpora under testdata/fuzz from testdata/wire-vectors.json")

// fuzzFrameMax is the frame limit FuzzReadFrame reads with: small, but
// large enough for every vector.
const fuzzFrameMax = 256

// hostilePayloads are seeds beyond the vectors: bombs, deep nesting and
// earlier crashers.
func hostilePayloads() map[string][]byte {
	h := map[string][]byte{
		"deadline-overflow-before-str-id": env{"deadline": uintv(1<<64 - 1), "id": str("v")}.encode(),
		"deadline-overflow-before-op-v":   env{"deadline": uintv(1<<64 - 1), "id": bin(testID), "op": str("v")}.encode(),
		"response-body-str":               baseResp.with("body", str("x")).encode(),
		"response-error":                  baseResp.with("ok", AppendBool(nil, false)).with("err", m("code", "x.y", "zz", arr())).encode(),
		"request-all-fields":              baseReq.encode(),
		"request-version-2-unknown":       baseReq.with("v", uintv(2)).with("zzz", uintv(1)).encode(),
		"request-salvage-id":              append(baseReq.encode(), 0),
		"deep-arrays":                     bytes.Repeat([]byte{0x91}, 64),
		"deep-maps":                       nest(40, true, []byte{1}),
		"full-body":                       fullBodyWire,
		"body-unknown-nested":             m("in", m("zz", 1)),
		"body-overflow-uint8":             m("in", m("count", 256)),
		"stream-exit":                     m("status", -1, "t", "exit"),
		"stream-trailers":                 m("h", arr(m("name", "X-Sum", "value", "ok"), m("name", "X-Empty")), "t", "trailers"),
		"stream-trailers-unknown-entry":   m("h", arr(m("name", "a", "zz", 1)), "t", "trailers"),
		"empty":                           {},
	}
	for name, b := range bombs {
		h[name] = b
	}
	return h
}

// vectorPayloads are the payloads of every vector in wire-vectors.json.
func vectorPayloads(t testing.TB) map[string][]byte {
	vf := loadVectors(t)
	out := map[string][]byte{}
	for _, v := range slices.Concat(vf.Valid, vf.AcceptOnly, vf.Invalid) {
		b, err := hex.DecodeString(v.Hex)
		if err != nil {
			t.Fatal(err)
		}
		out[v.Name] = b
	}
	return out
}

// seedCorpora returns, for each fuzz target, its seed files by name.
func seedCorpora(t testing.TB) map[string]map[string][]byte {
	payloads := map[string][]byte{}
	for name, b := range vectorPayloads(t) {
		payloads["vector-"+name] = b
	}
	for name, b := range hostilePayloads() {
		payloads["hostile-"+safeName(name)] = b
	}
	frames := map[string][]byte{}
	for name, b := range payloads {
		if len(b) > 0 {
			frames[name] = AppendFrame(nil, b)
		}
	}
	frames["hostile-length-zero"] = header(0)
	frames["hostile-length-max"] = header(0xffffffff)
	frames["hostile-over-small-max"] = append(header(fuzzFrameMax+1), make([]byte, fuzzFrameMax+1)...)
	frames["hostile-truncated-header"] = []byte{0, 0}
	frames["hostile-truncated-payload"] = append(header(10), 1, 2)
	frames["hostile-two-frames"] = AppendFrame(AppendFrame(nil, []byte{1}), []byte{0xc3})
	return map[string]map[string][]byte{
		"FuzzReadFrame":         frames,
		"FuzzDecodeEnvelope":    payloads,
		"FuzzValidate":          payloads,
		"FuzzUnmarshalStrict":   payloads,
		"FuzzDecodeStreamFrame": payloads,
	}
}

func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '-'
		}
	}
	return string(b)
}

func corpusFile(b []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b)
}

// TestFuzzSeedCorpora keeps testdata/fuzz in step with the vectors: it
// fails when a seed is missing or stale; -update rewrites them.
func TestFuzzSeedCorpora(t *testing.T) {
	for target, seeds := range seedCorpora(t) {
		dir := filepath.Join("testdata", "fuzz", target)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for name, b := range seeds {
			path := filepath.Join(dir, name)
			want := corpusFile(b)
			if *update {
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s is missing or stale; run go test -run TestFuzzSeedCorpora -update", path)
			}
		}
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		off := 0
		for {
			p, err := ReadFrame(r, fuzzFrameMax)
			if err == io.EOF {
				if off != len(data) {
					t.Fatalf("io.EOF at offset %d of %d", off, len(data))
				}
				return
			}
			if err != nil {
				switch CodeOf(err) {
				case CodeFrameEmpty, CodeFrameTooLarge, CodeFrameTruncated:
				default:
					t.Fatalf("unexpected error %v", err)
				}
				if errors.Is(err, io.EOF) {
					t.Fatalf("%v must not look like a clean EOF", err)
				}
				return
			}
			if len(p) < 1 || len(p) > fuzzFrameMax {
				t.Fatalf("accepted a payload of %d bytes (max %d)", len(p), fuzzFrameMax)
			}
			if !bytes.Equal(p, data[off+4:off+4+len(p)]) {
				t.Fatal("payload differs from the input")
			}
			off += 4 + len(p)
		}
	})
}

var envelopeCodes = []string{CodeFrameMalformed, CodeProtocolVersion, CodeRequestUnknownField, CodeRequestInvalid}

func FuzzDecodeEnvelope(f *testing.F) {
	f.Fuzz(func(t *testing.T, payload []byte) {
		r, err := DecodeRequest(payload, Limits{})
		if r == nil {
			t.Fatal("DecodeRequest returned a nil *Request")
		}
		if len(r.ID) != 0 && len(r.ID) != IDLen {
			t.Fatalf("returned an id of %d bytes", len(r.ID))
		}
		if err != nil && !slices.Contains(envelopeCodes, CodeOf(err)) {
			t.Fatalf("unexpected error %v", err)
		}
		if small, serr := DecodeRequest(payload, Limits{MaxDepth: 3, MaxElements: 64}); serr == nil && err != nil {
			t.Fatalf("accepted under small limits (%+v) but not default ones: %v", small, err)
		}
		if err == nil {
			enc := AppendRequest(nil, r)
			if err := Validate(enc, Limits{}); err != nil {
				t.Fatalf("re-encoding is not canonical: %v", err)
			}
			again, err := DecodeRequest(enc, Limits{})
			if err != nil {
				t.Fatalf("re-encoding does not decode: %v", err)
			}
			if !reflect.DeepEqual(again, r) {
				t.Fatalf("round trip changed the request: %+v != %+v", again, r)
			}
			if !bytes.Equal(AppendRequest(nil, again), enc) {
				t.Fatal("re-encoding is not a fixed point")
			}
		}

		resp, err := DecodeResponse(payload, Limits{})
		if err != nil {
			if resp != nil || !slices.Contains([]string{CodeFrameMalformed, CodeProtocolVersion}, CodeOf(err)) {
				t.Fatalf("unexpected response error %v (%+v)", err, resp)
			}
			return
		}
		// The encoder writes only the half that ok selects.
		if resp.OK {
			resp.Err = nil
		} else {
			resp.Body = nil
		}
		enc := AppendResponse(nil, resp)
		if err := Validate(enc, Limits{}); err != nil {
			t.Fatalf("response re-encoding is not canonical: %v", err)
		}
		again, err := DecodeResponse(enc, Limits{})
		if err != nil {
			t.Fatalf("response re-encoding does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, resp) {
			t.Fatalf("round trip changed the response: %+v != %+v", again, resp)
		}
	})
}

func FuzzValidate(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Validate(data, Limits{})
		if err != nil && CodeOf(err) != CodeFrameMalformed {
			t.Fatalf("unexpected error %v", err)
		}
		if Validate(data, Limits{MaxDepth: 3, MaxElements: 64}) == nil && err != nil {
			t.Fatal("accepted under small limits but not default ones")
		}
		if err != nil {
			return
		}
		c := cursor{b: data}
		if n := len(c.skip()); n != len(data) {
			t.Fatalf("skip covers %d of %d bytes", n, len(data))
		}
		// The canonical form is unique: msgpack decodes the value and
		// Marshal reproduces the same bytes.
		var v any
		if err := decodeAny(data, &v); err != nil {
			t.Fatalf("msgpack cannot decode a valid value: %v", err)
		}
		again, err := Marshal(v)
		if err != nil {
			t.Fatalf("Marshal of the decoded value: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, data)
		}
	})
}

func FuzzUnmarshalStrict(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var strict testBody
		err := DecodeBody(data, &strict, true)
		var lenient testBody
		lerr := DecodeBody(data, &lenient, false)
		if err != nil {
			if c := CodeOf(err); c != CodeFrameMalformed && c != CodeRequestUnknownField {
				t.Fatalf("unexpected error %v", err)
			}
			if lerr != nil && CodeOf(lerr) != CodeFrameMalformed {
				t.Fatalf("unexpected lenient error %v", lerr)
			}
			return
		}
		if lerr != nil || !reflect.DeepEqual(lenient, strict) {
			t.Fatalf("lenient decoding differs from strict: %v", lerr)
		}
		enc, err := Marshal(strict)
		if err != nil {
			t.Fatalf("Marshal of a decoded body: %v", err)
		}
		var again testBody
		if err := DecodeBody(enc, &again, true); err != nil {
			t.Fatalf("re-encoded body does not decode: %v", err)
		}
		enc2, err := Marshal(again)
		if err != nil || !bytes.Equal(enc2, enc) {
			t.Fatalf("re-encoding is not a fixed point: %v", err)
		}
	})
}

func FuzzDecodeStreamFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := DecodeStreamFrame(data)
		if err != nil {
			if fr != nil {
				t.Fatal("a frame with an error")
			}
			if c := CodeOf(err); c != CodeFrameMalformed && c != CodeRequestUnknownField {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		// The canonical re-encoding decodes to the same frame and is a
		// fixed point (an explicit zero in the input is absent in it).
		enc, err := Marshal(fr)
		if err != nil {
			t.Fatalf("Marshal of a decoded frame: %v", err)
		}
		again, err := DecodeStreamFrame(enc)
		if err != nil {
			t.Fatalf("re-encoded frame does not decode: %v", err)
		}
		if !reflect.DeepEqual(normalFrame(again), normalFrame(fr)) {
			t.Fatalf("round trip changed the frame: %+v != %+v", again, fr)
		}
		if enc2, err := Marshal(again); err != nil || !bytes.Equal(enc2, enc) {
			t.Fatalf("re-encoding is not a fixed point: %v", err)
		}
	})
}

// normalFrame returns f with empty slices as nil: an explicit empty b or
// h decodes as an empty slice, its re-encoding (absent) as nil.
func normalFrame(f *StreamFrame) StreamFrame {
	n := *f
	if len(n.B) == 0 {
		n.B = nil
	}
	if len(n.H) == 0 {
		n.H = nil
	}
	return n
}
