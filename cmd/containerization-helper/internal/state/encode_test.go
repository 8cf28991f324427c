package state

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/matryer/is"
)

// encode gives exactly json.Marshal's bytes (plus the newline), with and
// without cached idempotency records, for empty and full documents.
func TestEncodeMatchesMarshal(t *testing.T) {
	t.Parallel()
	full := newDoc("7d3c9a57-2f4e-4b8a-9c1d-0e5f6a7b8c9d", 1700000000000)
	full.Generation = 42
	full.Fences["inst-\"quoted\""] = 3
	full.Containers["hk-0123456789abcdef"] = contJSON{Instance: "i", Bundle: "/b/<&>", Phase: PhaseRunning, UpdatedMS: 5}
	for i := range 5 {
		full.Idempotency = append(full.Idempotency, idemJSON{Key: []byte(fmt.Sprintf("0:k%d\x00\xff", i)), Op: "container.start",
			RequestHash: "h", Result: []byte{0, 1, 2, byte(i)}, CreatedMS: int64(i), ExpiresMS: int64(i) + 1})
	}
	bare := &doc{Schema: SchemaVersion, Project: "p"}
	for _, tt := range []struct {
		name  string
		d     *doc
		valid bool // a document decodeDoc accepts: it must decode back to the same bytes
	}{{"full", full, false}, {"nil maps and list", bare, false}, {"new", newDoc("7d3c9a57-2f4e-4b8a-9c1d-0e5f6a7b8c9d", 1), true}} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			want, err := json.Marshal(tt.d)
			is.NoErr(err)
			for range 2 { // the second encode reuses the cached records
				got, err := tt.d.encode()
				is.NoErr(err)
				is.Equal(string(got), string(want)+"\n")
			}
			if tt.valid {
				back, err := decodeDoc(append(want, '\n'))
				is.NoErr(err)
				again, err := back.encode()
				is.NoErr(err)
				is.Equal(string(again), string(want)+"\n")
			}
		})
	}
}
