package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

var ctx = context.Background()

func TestStageLookupConsume(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, allRoles())
	h.put(t, "github", []string{"https://api.github.com"})
	st, err := h.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "github", Invocation: "inv-1"})
	is.NoErr(err)
	is.True(strings.HasPrefix(st.Placeholder, "hkp_"))
	// lookup twice: metadata only, never the value; then consume works.
	for range 2 {
		var raw map[string]any
		is.NoErr(h.raw.Call(ctx, secretdapi.OpLeaseLookup, &secretdapi.LeaseLookupRequest{Handle: st.Handle}, &raw))
		b, _ := json.Marshal(raw)
		is.True(!bytes.Contains(b, canary))
		is.Equal(raw["credential"], "github")
		_, hasValue := raw["value"]
		is.True(!hasValue)
	}
	out, err := h.api.LeaseConsume(ctx, "inv-1", [][]byte{st.Handle})
	is.NoErr(err)
	is.Equal(len(out.Leases), 1)
	l := out.Leases[0]
	is.Equal(l.Value, canary)
	is.Equal(l.Handle, st.Handle)
	is.Equal(l.Placeholder, st.Placeholder)
	is.Equal(l.Destination, "https://api.github.com")
	is.Equal(l.Target, "header:Authorization")
	is.Equal(l.Template, "Bearer {}")
	is.Equal(h.alloc.Live(), int64(1)) // only the credential: the lease's buffer was freed after encoding
	_, err = h.api.LeaseConsume(ctx, "inv-1", [][]byte{st.Handle})
	is.Equal(wire.CodeOf(err), secretdapi.CodeLeaseConsumed)
	// The reuse is audited once, naming the stager.
	var reuse []Event
	for _, ev := range h.auditLog() {
		if ev.Op == OpReuseAttempt {
			reuse = append(reuse, ev)
		}
	}
	is.Equal(len(reuse), 1)
	is.Equal(reuse[0].Fields["stager_uid"], self)
	h.checkNoLeak(t, st.Handle)
}

// TestBasicTargetsOverSocket: a credential with both Basic halves as
// targets, one with a fixed user-id, stores and lists them; a lease staged
// for each half carries its target and (for the password only) the fixed
// user-id, and no template or overwrite.
func TestBasicTargetsOverSocket(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, allRoles())
	h.put(t, "git", []string{"https://git.example.com"},
		secretdapi.TargetSpec{Target: secretdapi.TargetBasicPassword, BasicUser: "x-access-token"},
		secretdapi.TargetSpec{Target: secretdapi.TargetBasicUser})
	list, err := h.api.CredentialList(ctx)
	is.NoErr(err)
	is.Equal(list.Credentials[0].Targets, []secretdapi.TargetSpec{
		{Target: "basic:password", BasicUser: "x-access-token"}, {Target: "basic:user"}})
	var handles [][]byte
	for _, target := range []string{"basic:password", "basic:user"} {
		st, err := h.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "git", Invocation: "inv-b", Target: target})
		is.NoErr(err)
		handles = append(handles, st.Handle)
	}
	out, err := h.api.LeaseConsume(ctx, "inv-b", handles)
	is.NoErr(err)
	is.Equal(len(out.Leases), 2)
	pw, user := out.Leases[0], out.Leases[1]
	is.Equal(pw.Target, "basic:password")
	is.Equal(pw.BasicUser, "x-access-token")
	is.Equal(user.Target, "basic:user")
	is.Equal(user.BasicUser, "")
	for _, l := range out.Leases {
		is.Equal(l.Value, canary)
		is.Equal(l.Template, "")
		is.True(!l.Overwrite)
	}
	// A value with a ':' cannot be a user-id: refused at put, naming no value.
	_, err = h.api.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: "bad", Value: []byte("a:" + string(canary)),
		Destinations: []string{"https://git.example.com"}, Targets: []secretdapi.TargetSpec{{Target: "basic:user"}}}, "")
	is.Equal(wire.CodeOf(err), secretdapi.CodeCredentialInvalid)
	is.True(!strings.Contains(err.Error(), string(canary)))
	for _, hd := range handles {
		h.checkNoLeak(t, hd)
	}
}

func TestStageRules(t *testing.T) {
	t.Parallel()
	h := start(t, allRoles())
	h.put(t, "one", []string{"https://api.example.com"})
	h.put(t, "two-targets", []string{"https://api.example.com"},
		secretdapi.TargetSpec{Target: "header:Authorization"}, secretdapi.TargetSpec{Target: "query:key"})
	h.put(t, "two-dests", []string{"https://a.example.com", "https://b.example.com"})
	for _, tt := range []struct {
		name string
		req  secretdapi.LeaseStageRequest
		code string
	}{
		{"ambiguous target", secretdapi.LeaseStageRequest{Credential: "two-targets", Invocation: "i"}, secretdapi.CodeLeaseAmbiguous},
		{"ambiguous destination", secretdapi.LeaseStageRequest{Credential: "two-dests", Invocation: "i"}, secretdapi.CodeLeaseAmbiguous},
		{"target named", secretdapi.LeaseStageRequest{Credential: "two-targets", Invocation: "i", Target: "query:key"}, ""},
		{"destination named non-canonically", secretdapi.LeaseStageRequest{Credential: "two-dests", Invocation: "i", Destination: "HTTPS://B.example.com:443"}, ""},
		{"target not allowed", secretdapi.LeaseStageRequest{Credential: "one", Invocation: "i", Target: "query:key"}, secretdapi.CodeLeaseTargetDenied},
		{"destination not allowed", secretdapi.LeaseStageRequest{Credential: "one", Invocation: "i", Destination: "https://evil.example"}, secretdapi.CodeLeaseDestinationDenied},
		{"unknown credential", secretdapi.LeaseStageRequest{Credential: "nope", Invocation: "i"}, secretdapi.CodeCredentialNotFound},
		{"bad invocation", secretdapi.LeaseStageRequest{Credential: "one", Invocation: "Bad_Inv"}, secretdapi.CodeInvocationInvalid},
		{"owner named", secretdapi.LeaseStageRequest{Credential: "one", Invocation: "i", Owner: "sv-0123abcd"}, ""},
		{"bad owner", secretdapi.LeaseStageRequest{Credential: "one", Invocation: "i", Owner: "Sv_1"}, secretdapi.CodeOwnerInvalid},
		{"owner too long", secretdapi.LeaseStageRequest{Credential: "one", Invocation: "i", Owner: strings.Repeat("a", 65)}, secretdapi.CodeOwnerInvalid},
		{"ttl too short", secretdapi.LeaseStageRequest{Credential: "one", Invocation: "i", TTLMS: 999}, secretdapi.CodeLeaseInvalidTTL},
		{"ttl too long", secretdapi.LeaseStageRequest{Credential: "one", Invocation: "i", TTLMS: secretdapi.MaxTTLMS + 1}, secretdapi.CodeLeaseInvalidTTL},
		{"ttl negative", secretdapi.LeaseStageRequest{Credential: "one", Invocation: "i", TTLMS: -5}, secretdapi.CodeLeaseInvalidTTL},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			_, err := h.api.LeaseStage(ctx, &tt.req)
			is.Equal(wire.CodeOf(err), tt.code)
		})
	}
}

// TestStageRefusesValue: the stage schema has no field for raw material.
func TestStageRefusesValue(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, allRoles())
	h.put(t, "one", []string{"https://api.example.com"})
	for _, field := range []string{"value", "secret", "raw"} {
		body := map[string]any{"credential": "one", "invocation": "i", field: canary}
		err := h.raw.Call(ctx, secretdapi.OpLeaseStage, body, nil)
		is.Equal(wire.CodeOf(err), wire.CodeRequestUnknownField)
		is.True(!strings.Contains(err.Error(), string(canary)))
	}
	is.Equal(len(h.srv.table.List("", "")), 0)
	h.checkNoLeak(t, nil)
}

// TestOwnersOverSocket: lease.list and lease.revoke select by owner id
// over the wire, from both sides: a revoke naming one owner leaves the
// other's lease staged; a malformed owner is owner.invalid and changes
// nothing; each revoke's audit record names the owner.
func TestOwnersOverSocket(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, allRoles())
	h.put(t, "one", []string{"https://api.example.com"})
	for _, owner := range []string{"sv-a", "sv-a", "sv-b"} {
		_, err := h.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "one", Invocation: "inv-1", Owner: owner})
		is.NoErr(err)
	}
	l, err := h.api.LeaseListOwned(ctx, "sv-a", "")
	is.NoErr(err)
	is.Equal(len(l.Leases), 2)
	is.Equal(l.Leases[0].Owner, "sv-a")
	for _, bad := range []string{"SV-A", "sv_a", strings.Repeat("x", 65)} {
		_, err = h.api.LeaseListOwned(ctx, bad, "")
		is.Equal(wire.CodeOf(err), secretdapi.CodeOwnerInvalid)
		_, err = h.api.LeaseRevokeOwned(ctx, "inv-1", bad)
		is.Equal(wire.CodeOf(err), secretdapi.CodeOwnerInvalid)
	}
	all, err := h.api.LeaseList(ctx, "inv-1")
	is.NoErr(err)
	is.Equal(len(all.Leases), 3) // the refused calls revoked nothing
	r, err := h.api.LeaseRevokeOwned(ctx, "inv-1", "sv-a")
	is.NoErr(err)
	is.Equal(r.Revoked, 2)
	l, err = h.api.LeaseListOwned(ctx, "", "inv-1")
	is.NoErr(err)
	is.Equal(len(l.Leases), 1)
	is.Equal(l.Leases[0].Owner, "sv-b") // the other owner's lease is untouched
	var revokes []Event
	for _, ev := range h.auditLog() {
		if ev.Op == secretdapi.OpLeaseRevoke && ev.Code == "" {
			revokes = append(revokes, ev)
		}
	}
	is.Equal(len(revokes), 1)
	is.Equal(revokes[0].Fields["owner"], "sv-a")
}

func TestConsumeRefusesIdempotencyKey(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, allRoles())
	h.put(t, "one", []string{"https://api.example.com"})
	st, err := h.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "one", Invocation: "i"})
	is.NoErr(err)
	err = h.raw.Call(ctx, secretdapi.OpLeaseConsume, &secretdapi.LeaseConsumeRequest{Handles: [][]byte{st.Handle}, Invocation: "i"}, nil, rpc.WithIdem("k1"))
	is.Equal(wire.CodeOf(err), wire.CodeRequestInvalid)
	_, err = h.api.LeaseConsume(ctx, "i", [][]byte{st.Handle})
	is.NoErr(err) // nothing was consumed by the refused call
}

// TestWrongRole: each op from a peer that holds only other roles is
// peer.denied (stager consuming, consumer staging, ...).
func TestWrongRole(t *testing.T) {
	t.Parallel()
	const other = 4242
	for _, tt := range []struct {
		name  string
		roles rpc.Roles
		ops   []string
	}{
		{"stager only", rpc.Roles{secretdapi.RoleStager: {self}, secretdapi.RoleAdmin: {other}, secretdapi.RoleConsumer: {other}},
			[]string{secretdapi.OpLeaseConsume, secretdapi.OpCredentialPut, secretdapi.OpCredentialDelete, secretdapi.OpCredentialList}},
		{"consumer only", rpc.Roles{secretdapi.RoleConsumer: {self}, secretdapi.RoleAdmin: {other}, secretdapi.RoleStager: {other}},
			[]string{secretdapi.OpLeaseStage, secretdapi.OpLeaseRevoke, secretdapi.OpLeaseLookup, secretdapi.OpLeaseList,
				secretdapi.OpCredentialPut, secretdapi.OpCredentialDelete, secretdapi.OpCredentialList}},
		{"admin only", rpc.Roles{secretdapi.RoleAdmin: {self}, secretdapi.RoleStager: {other}, secretdapi.RoleConsumer: {other}},
			[]string{secretdapi.OpLeaseStage, secretdapi.OpLeaseRevoke, secretdapi.OpLeaseLookup, secretdapi.OpLeaseConsume}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			h := start(t, tt.roles)
			for _, op := range tt.ops {
				err := h.raw.Call(ctx, op, nil, nil)
				is.Equal(wire.CodeOf(err), wire.CodePeerDenied) // op
			}
		})
	}
}

func TestFloodOfBogusHandlesIsAggregated(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, allRoles())
	bogus := make([]byte, 40)
	for i := range 50 {
		bogus[39] = byte(i)
		_, err := h.api.LeaseLookup(ctx, bogus)
		is.True(err != nil)
		_, err = h.api.LeaseConsume(ctx, "i", [][]byte{bogus})
		is.True(err != nil)
	}
	h.srv.FlushFloods(ctx, true)
	var individual, summaries int
	var suppressed int
	for _, ev := range h.auditLog() {
		switch ev.Op {
		case OpBogusHandles:
			summaries++
			suppressed += ev.Fields["suppressed"].(int)
		case secretdapi.OpLeaseLookup, secretdapi.OpLeaseConsume:
			individual++
		}
	}
	is.True(individual+summaries < 10) // not one per request
	is.Equal(individual+suppressed, 100)
}

// checkNoLeak asserts that neither the canary value nor the handle (raw,
// hex or base64) is in any log line or audit event.
func (h *harness) checkNoLeak(t *testing.T, handle []byte) {
	t.Helper()
	evs, _ := json.Marshal(h.auditLog())
	for _, out := range [][]byte{h.logs.Bytes(), evs} {
		for _, secret := range [][]byte{canary, handle} {
			if len(secret) == 0 {
				continue
			}
			for _, form := range []string{string(secret), hex.EncodeToString(secret), base64.StdEncoding.EncodeToString(secret),
				base64.RawURLEncoding.EncodeToString(secret), base64.RawStdEncoding.EncodeToString(secret)} {
				if bytes.Contains(out, []byte(form)) {
					t.Fatalf("secret material (%d bytes) leaked into logs or audit", len(secret))
				}
			}
		}
	}
}
