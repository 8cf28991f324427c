package audit

import (
	"testing"
)

// FuzzParseLine checks that the line parser Verify uses never panics and
// that whatever it accepts re-encodes to a line it accepts again.
func FuzzParseLine(f *testing.F) {
	f.Add([]byte(`{"seq":1,"time":"2025-01-02T03:04:05.000000001Z","daemon":"secretd","actor":{"uid":0,"pid":1},"op":"lease.stage","outcome":"ok","prev":"0000000000000000000000000000000000000000000000000000000000000000"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := parseLine(line)
		if err != nil {
			return
		}
		again, err := marshalLine(r)
		if err != nil {
			t.Fatalf("accepted record does not re-encode: %v", err)
		}
		r2, err := parseLine(again)
		if err != nil {
			t.Fatalf("re-encoded record rejected: %v\n%s", err, again)
		}
		if r2.Seq != r.Seq || r2.Prev != r.Prev || !r2.Time.Equal(r.Time) || r2.Op != r.Op {
			t.Fatalf("round trip changed the record: %+v vs %+v", r, r2)
		}
	})
}
