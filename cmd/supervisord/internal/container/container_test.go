package container

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// The helper's errors map to supervisord's codes and keep the reason;
// only definite answers (retry never or safe) clear a pending mutation.
func TestErrorMapping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		err      error
		code     string
		definite bool
	}{
		{"not running", &wire.Error{Code: wire.CodeUnavailable, Retry: wire.RetrySafe}, api.CodeRuntimeUnavailable, false},
		{"peer denied", &wire.Error{Code: wire.CodePeerDenied, Retry: wire.RetryNever}, api.CodeRuntimeUnavailable, false},
		{"connection broke", &wire.Error{Code: wire.CodeConnectionClosed, Retry: wire.RetryAfterObserve}, api.CodeRuntimeUnavailable, false},
		{"no provider", &wire.Error{Code: "provider.unavailable", Retry: wire.RetryNever}, api.CodeRuntimeUnavailable, true},
		{"provider failed", &wire.Error{Code: "provider.failed", Retry: wire.RetryAfterObserve}, api.CodeRuntimeUnavailable, false},
		{"internal", &wire.Error{Code: wire.CodeInternal, Retry: wire.RetryNever}, api.CodeRuntimeUnavailable, false},
		{"bad image", &wire.Error{Code: "image.not_found", Retry: wire.RetryNever}, api.CodeInstanceInvalid, true},
		{"bad request", &wire.Error{Code: wire.CodeRequestInvalid, Retry: wire.RetryNever}, api.CodeInstanceInvalid, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			got := mapErr("step", tc.err)
			is.Equal(wire.CodeOf(got), tc.code)
			is.True(strings.Contains(wire.AsError(got).Msg, wire.CodeOf(tc.err))) // the reason travels
			is.Equal(definite(tc.err), tc.definite)
		})
	}
}

func TestIdemKeyFits(t *testing.T) {
	t.Parallel()
	k := idemKey(api.NewID(), "0a1b2c", StepDelete, 1<<30)
	is.New(t).True(len(k) <= 64)
	is.New(t).True(len(idemKey(api.NewID(), "", StepDelete, 1<<30)) <= 64)
}

// A record round-trips; Readopt raises the fence of a live container's
// record only; a missing record is not an error.
func TestRecordAndReadopt(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := t.TempDir()
	is.NoErr(Readopt(dir))
	_, err := LoadRecord(dir)
	is.True(errors.Is(err, os.ErrNotExist))
	r := &Record{Fence: 1, ContainerID: "hk-0123456789abcdef", Done: []string{StepCreate, StepStart}}
	is.NoErr(r.Save(dir))
	fi, err := os.Stat(filepath.Join(dir, FileRecord))
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o600))
	is.NoErr(Readopt(dir))
	got, err := LoadRecord(dir)
	is.NoErr(err)
	is.Equal(got.Fence, uint64(2))
	is.True(got.Started() && !got.Deleted())
	got.Done = append(got.Done, StepDelete)
	is.NoErr(got.Save(dir))
	is.NoErr(Readopt(dir))
	got, err = LoadRecord(dir)
	is.NoErr(err)
	is.Equal(got.Fence, uint64(2)) // deleted: nothing to fence
	is.NoErr(os.WriteFile(filepath.Join(dir, FileRecord), []byte(`{"schema_version": 9}`), 0o600))
	_, err = LoadRecord(dir)
	is.True(err != nil)
}
