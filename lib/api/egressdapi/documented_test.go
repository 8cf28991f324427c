package egressdapi

import (
	"bytes"
	"os"
	"testing"
)

// Every code is listed in docs/protocol.md: codes are API.
func TestCodesDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Codes {
		if !bytes.Contains(doc, []byte("`"+c+"`")) {
			t.Errorf("docs/protocol.md does not list %s", c)
		}
	}
}
