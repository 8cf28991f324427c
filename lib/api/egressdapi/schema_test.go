package egressdapi

import (
	"slices"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

func TestSchemas(t *testing.T) {
	t.Parallel()
	for _, v := range []any{
		AllowRule{}, Policy{}, BundleRegisterRequest{}, BundleRegisterResponse{}, BundleDropRequest{},
		BundleDropResponse{}, BundleListRequest{}, BundleInfo{}, BundleListResponse{}, InfoResponse{}, Header{}, RequestRequest{}, RequestResponse{}, RequestStreamResponse{},
		StatsRequest{}, InvocationStats{}, StatsResponse{},
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

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	in := RequestRequest{Body: []byte("x"), Headers: []Header{{Name: "A", Value: "b"}}, Invocation: "inv-1", Method: "GET", URL: "https://api.example.com/"}
	b, err := wire.Marshal(&in)
	is.NoErr(err)
	var out RequestRequest
	is.NoErr(wire.Unmarshal(b, &out, true))
	is.Equal(out.URL, in.URL)
	is.Equal(out.Headers, in.Headers)
}
