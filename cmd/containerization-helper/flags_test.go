package main

import (
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/audit"
)

func TestFsyncPolicy(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want audit.FsyncPolicy
		ok   bool
	}{{"always", audit.FsyncAlways, true}, {"never", audit.FsyncNever, true}, {"", 0, false}, {"sometimes", 0, false}} {
		t.Run(tt.in, func(t *testing.T) {
			is := is.New(t)
			got, err := fsyncPolicy(tt.in)
			is.Equal(err == nil, tt.ok)
			is.Equal(got, tt.want)
		})
	}
}
