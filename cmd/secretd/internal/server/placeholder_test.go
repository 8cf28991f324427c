package server

import (
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// TestStageWithPlaceholder: a stage may name the placeholder it wants
// (a re-registration keeps the one in the agent's environment), from both
// sides: a well-formed one is used and consumed as any other; a malformed
// one is request.invalid; one that another invocation's live lease holds
// is lease.placeholder_in_use, while the same invocation may stage it
// again, and once the other lease is consumed or revoked it is free; only
// the stager role may stage at all; audit records say a placeholder was
// given but never name it.
func TestStageWithPlaceholder(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, allRoles())
	h.put(t, "one", []string{"https://api.example.com"})
	ph := "hkp_" + strings.Repeat("q7", 16)
	other := "hkp_" + strings.Repeat("m3", 16)

	st, err := h.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "one", Invocation: "inv-a", Placeholder: ph})
	is.NoErr(err)
	is.Equal(st.Placeholder, ph)
	meta, err := h.api.LeaseLookup(ctx, st.Handle)
	is.NoErr(err)
	is.Equal(meta.Placeholder, ph)

	for _, tc := range []struct {
		name, inv, ph, code string
	}{
		{"another invocation's live lease holds it", "inv-b", ph, secretdapi.CodeLeasePlaceholderInUse},
		{"the same invocation may stage it again", "inv-a", ph, ""},
		{"another placeholder is free", "inv-b", other, ""},
		{"upper case", "inv-b", strings.ToUpper(ph), wire.CodeRequestInvalid},
		{"too short", "inv-b", ph[:20], wire.CodeRequestInvalid},
		{"not base32", "inv-b", "hkp_" + strings.Repeat("01", 16), wire.CodeRequestInvalid},
		{"with a value appended", "inv-b", ph + string(canary), wire.CodeRequestInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			_, err := h.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "one", Invocation: tc.inv, Placeholder: tc.ph})
			is.Equal(wire.CodeOf(err), tc.code)
			if err != nil {
				is.True(!strings.Contains(err.Error(), ph)) // the refusal does not name the placeholder
			}
		})
	}
	// inv-b's lease of `other` and inv-a's two of ph are staged; inv-b
	// got none of ph.
	l, err := h.api.LeaseList(ctx, "inv-b")
	is.NoErr(err)
	is.Equal(len(l.Leases), 1)
	is.Equal(l.Leases[0].Placeholder, other)

	// Consumed, the lease no longer holds the placeholder at secretd
	// (egressd's registry guards it from then on).
	res, err := h.api.LeaseConsume(ctx, "inv-a", [][]byte{st.Handle})
	is.NoErr(err)
	is.Equal(res.Leases[0].Placeholder, ph)
	_, err = h.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "one", Invocation: "inv-b", Placeholder: ph})
	is.Equal(wire.CodeOf(err), secretdapi.CodeLeasePlaceholderInUse) // inv-a's second lease still holds it
	_, err = h.api.LeaseRevoke(ctx, "inv-a")
	is.NoErr(err)
	_, err = h.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "one", Invocation: "inv-b", Placeholder: ph})
	is.NoErr(err) // revoked: free

	var given, inUse int
	for _, ev := range h.auditLog() {
		if ev.Op != secretdapi.OpLeaseStage {
			continue
		}
		for k, v := range ev.Fields {
			if s, ok := v.(string); ok && strings.Contains(s, "hkp_") {
				t.Fatalf("audit field %s names a placeholder", k)
			}
		}
		if ev.Fields["placeholder_given"] == true {
			given++
		}
		if ev.Code == secretdapi.CodeLeasePlaceholderInUse {
			inUse++
		}
	}
	is.Equal(inUse, 2)
	is.True(given >= 8)
	h.checkNoLeak(t, st.Handle)

	// Only a stager stages, with or without a placeholder.
	c := start(t, rpc.Roles{secretdapi.RoleConsumer: {self}, secretdapi.RoleAdmin: {self}, secretdapi.RoleStager: {4242}})
	c.put(t, "one", []string{"https://api.example.com"})
	_, err = c.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "one", Invocation: "inv-c", Placeholder: other})
	is.Equal(wire.CodeOf(err), wire.CodePeerDenied)
}
