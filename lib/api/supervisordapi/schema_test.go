package supervisordapi

import (
	"slices"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

func TestSchemas(t *testing.T) {
	t.Parallel()
	for _, v := range []any{
		CredentialSpec{}, Network{}, ImageRef{}, ProvisionRequest{}, ExitStatus{}, Instance{}, IDRequest{},
		ListResponse{}, SignalRequest{}, DestroyResponse{}, LogsRequest{}, LogsResponse{},
		AttachRequest{}, AttachResponse{}, Health{},
	} {
		is.New(t).NoErr(wire.CheckSchema(v))
	}
}

func TestCodesSortedUnique(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.True(slices.IsSorted(Codes))
	is.Equal(len(slices.Compact(slices.Clone(Codes))), len(Codes))
}

func TestCanonicalID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
		ok             bool
	}{
		{"lower", "0123abcd-0000-4000-8000-00000000000f", "0123abcd-0000-4000-8000-00000000000f", true},
		{"upper is lowercased", "0123ABCD-0000-4000-8000-00000000000F", "0123abcd-0000-4000-8000-00000000000f", true},
		{"no hyphens", "0123abcd000040008000000000000000000f", "", false},
		{"short", "0123abcd-0000-4000-8000-00000000000", "", false},
		{"non hex", "0123abcg-0000-4000-8000-00000000000f", "", false},
		{"path", "../../../../../../etc/passwd/xxxxxxxx", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			got, err := CanonicalID(tc.in)
			is.Equal(err == nil, tc.ok)
			if tc.ok {
				is.Equal(got, tc.want)
			} else {
				is.True(wire.HasCode(err, CodeInstanceInvalidID))
			}
		})
	}
	id := NewID()
	_, err := CanonicalID(id)
	is.New(t).NoErr(err)
	is.New(t).Equal(len(Hex16(id)), 16)
}
