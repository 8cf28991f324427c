package helperapi

import (
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  interface{ Validate() error }
		code string // "" = valid
	}{
		{name: "logs: default size", req: &LogsRequest{ContainerID: "hk-0123456789abcdef"}},
		{name: "logs: the cap", req: &LogsRequest{MaxBytes: MaxLogBytes}},
		{name: "logs: past the cap", req: &LogsRequest{MaxBytes: MaxLogBytes + 1}, code: wire.CodeRequestInvalid},
		{name: "logs: negative", req: &LogsRequest{MaxBytes: -1}, code: wire.CodeRequestInvalid},
		{name: "cancel: by request id", req: &CancelRequest{RequestID: make([]byte, wire.IDLen)}},
		{name: "cancel: by corr", req: &CancelRequest{Corr: "c-1"}},
		{name: "cancel: neither", req: &CancelRequest{}, code: wire.CodeRequestInvalid},
		{name: "cancel: short request id", req: &CancelRequest{RequestID: []byte{1}}, code: wire.CodeRequestInvalid},
		{name: "cancel: corr too long", req: &CancelRequest{Corr: strings.Repeat("c", wire.MaxCorrLen+1)}, code: wire.CodeRequestInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(wire.CodeOf(tc.req.Validate()), tc.code)
		})
	}
}
