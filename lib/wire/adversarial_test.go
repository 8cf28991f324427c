package wire

import (
	"bytes"
	"testing"
)

// A stream that ends inside a frame is frame.truncated with the retry hint
// docs/protocol.md gives it ("safe"), not "never".
func TestAdversarialTruncatedIsRetrySafe(t *testing.T) {
	for _, in := range [][]byte{{0, 0}, {0, 0, 0, 5, 0x81}, {0, 0, 0, 1}} {
		_, err := ReadFrame(bytes.NewReader(in), 0)
		e := AsError(err)
		if e.Code != CodeFrameTruncated || e.Retry != RetrySafe {
			t.Errorf("ReadFrame(% x) = %v (retry %q), want frame.truncated, retry safe", in, err, e.Retry)
		}
	}
}
