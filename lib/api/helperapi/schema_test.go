package helperapi

import (
	"slices"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

func TestSchemas(t *testing.T) {
	t.Parallel()
	for _, v := range []any{
		Context{}, ImageRef{}, NegotiateRequest{}, NegotiateResponse{}, Container{}, ObserveResponse{},
		Layer{}, Evidence{}, IDRequest{}, Usage{}, LogsRequest{}, LogsResponse{}, PlanRequest{},
		PlanResponse{}, MutationRequest{}, DeleteResponse{}, CancelRequest{}, CancelResponse{}, Health{},
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

// A plan request round-trips through the canonical encoding, and a
// strict decode refuses a field the op does not know.
func TestPlanRequestStrict(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	in := PlanRequest{Kind: KindCreate, Command: []string{"/bin/sh", "-c", "true"}, Image: &ImageRef{Layout: "/x", ManifestDigest: "sha256:00"},
		Context: Context{ProjectID: "p", InstanceID: "i", Fence: 3, CapabilityDigest: "sha256:11"}}
	b, err := wire.Marshal(&in)
	is.NoErr(err)
	var out PlanRequest
	is.NoErr(wire.Unmarshal(b, &out, true))
	is.Equal(out.Context, in.Context)
	is.Equal(out.Image.Layout, "/x")
	bad, err := wire.Marshal(map[string]any{"kind": "create", "zz": "1"})
	is.NoErr(err)
	is.Equal(wire.CodeOf(wire.Unmarshal(bad, &out, true)), wire.CodeRequestUnknownField)
}
