package state

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hostkit.dev/lib/wire"
)

// The seed corpus decodes as its name says.
func TestSeeds(t *testing.T) {
	t.Parallel()
	for name, code := range map[string]string{
		"valid.json": "", "schema2.json": CodeSchemaUnsupported, "dupkey.json": CodeCorrupt,
		"casekey.json": CodeCorrupt, "unknown.json": CodeCorrupt, "badpath.json": CodeCorrupt,
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "fuzz-seeds", name))
		if err != nil {
			t.Fatal(err)
		}
		_, err = decodeDoc(b)
		if wire.CodeOf(err) != code {
			t.Errorf("%s: %v, want %q", name, err, code)
		}
	}
}

// FuzzDecodeDoc: the decoder never panics, refuses with CodeCorrupt or
// CodeSchemaUnsupported only, and whatever it accepts re-encodes to a
// document that decodes to the same encoding (nothing is lost or
// invented on a rewrite).
func FuzzDecodeDoc(f *testing.F) {
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
		d, err := decodeDoc(b)
		if err != nil {
			if c := wire.CodeOf(err); c != CodeCorrupt && c != CodeSchemaUnsupported {
				t.Fatalf("unexpected code %s", c)
			}
			if strings.Contains(err.Error(), string(b)) && len(b) > 32 {
				t.Fatalf("the message echoes the document")
			}
			return
		}
		enc, err := d.encode()
		if err != nil {
			t.Fatal(err)
		}
		d2, err := decodeDoc(enc)
		if err != nil {
			t.Fatalf("re-encoded document refused: %v", err)
		}
		enc2, _ := d2.encode()
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable")
		}
	})
}
