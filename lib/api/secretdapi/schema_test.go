package secretdapi

import (
	"slices"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

func TestSchemas(t *testing.T) {
	t.Parallel()
	for _, v := range []any{
		TargetSpec{}, CredentialPutRequest{}, CredentialPutResponse{}, CredentialDeleteRequest{},
		CredentialMeta{}, CredentialListResponse{}, LeaseStageRequest{}, LeaseStageResponse{},
		LeaseConsumeRequest{}, Lease{}, LeaseConsumeResponse{}, LeaseLookupRequest{}, LeaseMeta{},
		LeaseRevokeRequest{}, LeaseRevokeResponse{}, LeaseListRequest{}, LeaseListResponse{},
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
