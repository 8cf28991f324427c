package image

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hostkit.dev/cmd/containerization-helper/internal/strictjson"
	"hostkit.dev/lib/wire"
)

// FuzzDecode feeds the index, manifest, config, oci-layout and umoci.json
// decoders arbitrary bytes, seeded from testdata/fuzz-seeds (real umoci
// output plus hostile shapes). They must never panic; every refusal is a
// *wire.Error with an image.* code; what checkJSON accepts is valid JSON;
// a selected manifest always has a well-formed sha256 digest.
func FuzzDecode(f *testing.F) {
	seeds, err := filepath.Glob("testdata/fuzz-seeds/*")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if checkJSON(b) == nil && !json.Valid(b) {
			t.Fatalf("checkJSON accepted invalid JSON %q", b)
		}
		typed := func(err error) {
			if err == nil {
				return
			}
			we, ok := err.(*wire.Error)
			if !ok || !strings.HasPrefix(we.Code, "image.") {
				t.Fatalf("untyped error %v", err)
			}
		}
		idx, err := decodeIndex(b, 1024)
		typed(err)
		if err == nil {
			d, _, err := selectManifest(idx, "")
			typed(err)
			if err == nil && checkDigest(d.Digest, "selected") != nil {
				t.Fatalf("selected a bad digest %q", d.Digest)
			}
		}
		_, err = decodeManifest(b, 128)
		typed(err)
		_, err = decodeConfig(b, 1)
		typed(err)
		typed(decodeLayoutFile(b))
		var m umociMeta
		_ = decodeStrict(b, &m, true)
	})
}

// Duplicate keys are refused at any depth and in any spelling that
// encoding/json would match to the same field.
func TestCheckJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in string
		ok bool
	}{
		{`{"a":1,"b":{"c":[1,{"d":2}]}}`, true},
		{`[]`, true},
		{`"x"`, true},
		{`{"a":1,"a":2}`, false},
		{`{"a":{"b":1,"b":1}}`, false},
		{`[{"x":1},{"x":1,"X":2}]`, false},
		{`{"k":1,"\u212a":2}`, false}, // Kelvin sign folds to k
		{`{"a":1}{"a":1}`, false},
		{`{"a":1} x`, false},
		{``, false},
		{`{"a":}`, false},
		{strings.Repeat("[", strictjson.DefaultMaxDepth+1) + strings.Repeat("]", strictjson.DefaultMaxDepth+1), false},
		{strings.Repeat("[", strictjson.DefaultMaxDepth) + strings.Repeat("]", strictjson.DefaultMaxDepth), true},
	}
	for _, tt := range tests {
		if err := checkJSON([]byte(tt.in)); (err == nil) != tt.ok {
			t.Errorf("checkJSON(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}
