package audit

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestMarshalLineMatchesEncodingJSON checks the hand-written encoder
// against encoding/json (SetEscapeHTML(false)) byte for byte.
func TestMarshalLineMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	hostile := "a\"b\\c\x00\x01\x1f\b\f\n\r\t<>&\u2028\u2029\x7f\xff\xfe é 😀 \xed\xa0\x80"
	tm := time.Date(2026, 11, 29, 11, 0, 0, 123456789, time.UTC)
	tests := []struct {
		name string
		r    Record
	}{
		{"minimal", Record{Seq: 1, Time: tm, Op: "x", Outcome: OutcomeOK, Prev: ZeroPrev}},
		{"zero time", Record{Op: "x", Outcome: OutcomeOK}},
		{"round second", Record{Seq: 2, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Op: "x", Outcome: OutcomeOK}},
		{"all fields", Record{Seq: 1 << 63, Time: tm, Daemon: "secretd", Actor: Actor{UID: -1, PID: 1 << 30}, Op: "lease.stage",
			Phase: PhaseBefore, Outcome: OutcomeRefused, Code: "lease.ambiguous", Corr: "c-1", Prev: ZeroPrev,
			Fields: map[string]any{"cred": "demo", "count": 3, "i8": int8(-8), "i16": int16(-16), "i32": int32(-32), "i64": int64(-1 << 62),
				"u": uint(1), "u8": uint8(8), "u16": uint16(16), "u32": uint32(32), "u64": uint64(1 << 63), "ok": true, "no": false,
				"nil": nil, "list": []string{"a", hostile}, "empty": []string{}, "nillist": []string(nil),
				"nested": []any{map[string]any{"z": 1, "a": "b", hostile: hostile}, []any{}, nil},
				"m":      map[string]any{}, hostile: hostile}}},
		{"hostile strings", Record{Time: tm, Daemon: hostile, Op: hostile, Outcome: Outcome(hostile), Code: hostile, Corr: hostile, Prev: hostile}},
		{"fallback type", Record{Time: tm, Op: "x", Outcome: OutcomeOK, Fields: map[string]any{"n": json.Number("12"), "s": struct{ A int }{1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			is.NoErr(enc.Encode(tt.r))
			got, err := marshalLine(tt.r)
			is.NoErr(err)
			is.Equal(string(got), string(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})))
		})
	}
}

// FuzzMarshalLine compares the two encoders on arbitrary strings.
func FuzzMarshalLine(f *testing.F) {
	f.Add("lease.stage", "k", "v\u2028\x00<")
	f.Add("\xff", "\xed\xa0\x80", "\"\\")
	f.Fuzz(func(t *testing.T, op, k, v string) {
		r := Record{Seq: 7, Time: time.Unix(1, 5).UTC(), Op: op, Outcome: OutcomeOK, Corr: v,
			Fields: map[string]any{k: v, "l": []string{k, v}, "m": map[string]any{v: k}}}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		got, err := marshalLine(r)
		if err != nil {
			t.Fatal(err)
		}
		if want := bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}); !bytes.Equal(got, want) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})
}
