package server

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"hostkit.dev/cmd/secretd/internal/credential"
	"hostkit.dev/cmd/secretd/internal/lease"
	"hostkit.dev/cmd/secretd/internal/secmem"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

var update = flag.Bool("update", false, "rewrite the fuzz seed corpus in testdata/fuzz")

// seeds are the canonical bodies each fuzz target starts from; -update
// writes them to testdata/fuzz/<target>/.
var seeds = map[string][]any{
	"FuzzCredentialPut": {
		&secretdapi.CredentialPutRequest{Destinations: []string{"https://api.github.com"}, Name: "github",
			Targets: []secretdapi.TargetSpec{{Overwrite: true, Target: "header:Authorization", Template: "Bearer {}"}}, Value: []byte("v")},
		map[string]any{"name": "x", "value": "a str, not bin"},
	},
	"FuzzCredentialDelete": {&secretdapi.CredentialDeleteRequest{Name: "github"}, map[string]any{"name": 7}},
	"FuzzLeaseStage": {
		&secretdapi.LeaseStageRequest{Credential: "github", Destination: "https://api.github.com", Invocation: "inv-1", Target: "header:Authorization", TTLMS: 1000},
		map[string]any{"credential": "github", "invocation": "i", "value": []byte("raw")},
		&secretdapi.LeaseStageRequest{Credential: "github", Destination: "https://api.github.com", Invocation: "inv-1",
			Placeholder: "hkp_abcdefghijklmnopqrstuvwxyz234567", Target: "query:t"},
		map[string]any{"credential": "github", "invocation": "i", "placeholder": []byte("hkp_")},
	},
	"FuzzLeaseConsume": {
		&secretdapi.LeaseConsumeRequest{Handles: [][]byte{make([]byte, 40), {1}}, Invocation: "inv-1"},
		map[string]any{"handles": []any{"str"}, "invocation": "i"},
	},
	"FuzzLeaseLookup":    {&secretdapi.LeaseLookupRequest{Handle: make([]byte, 40)}, map[string]any{"handle": -1}},
	"FuzzLeaseRevoke":    {&secretdapi.LeaseRevokeRequest{Invocation: "inv-1"}, map[string]any{"invocation": []byte("x")}},
	"FuzzLeaseList":      {&secretdapi.LeaseListRequest{Invocation: "inv-1"}, map[string]any{"extra": true}},
	"FuzzCredentialList": {map[string]any{}, map[string]any{"x": 1}},
}

func TestWriteFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz")
	}
	for target, bodies := range seeds {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, b := range bodies {
			raw, err := wire.Marshal(b)
			if err != nil {
				t.Fatal(err)
			}
			content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", raw)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d", i)), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// fuzzEnv is a registry with one credential and an empty lease table, for
// running decoded bodies through the handlers' validation.
func fuzzEnv(f *testing.F) (*credential.Registry, *lease.Table) {
	alloc := secmem.New(nil)
	reg := credential.NewRegistry(nil, alloc, nil)
	buf, _ := alloc.Copy([]byte("value"))
	reg.Add(credential.Credential{Value: buf, Meta: secretdapi.CredentialMeta{Name: "github",
		Destinations: []string{"https://api.github.com", "https://uploads.github.com"},
		Targets:      []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}, {Target: "query:t"}}}})
	table, err := lease.New(lease.Config{Alloc: alloc, MaxLeases: 10})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { table.Close(); reg.Close() })
	return reg, table
}

// decodeFuzz is the shape of every target: DecodeBody strictly into the
// op's request type must never panic or fail without a code, and an
// accepted body goes through the handler's own validation (check).
func decodeFuzz[T any](f *testing.F, check func(t *testing.T, req *T)) {
	f.Fuzz(func(t *testing.T, body []byte) {
		var req T
		if err := wire.DecodeBody(body, &req, true); err != nil {
			if wire.CodeOf(err) == wire.CodeInternal {
				t.Fatalf("decode error without a code: %v", err)
			}
			return
		}
		if check != nil {
			check(t, &req)
		}
	})
}

func FuzzCredentialPut(f *testing.F) {
	decodeFuzz(f, func(t *testing.T, req *secretdapi.CredentialPutRequest) {
		_, _ = credential.CanonicalDestinations(req.Destinations)
		_, _ = credential.CheckTargets(req.Targets)
		_ = credential.CheckValue(req.Value)
	})
}

func FuzzCredentialDelete(f *testing.F) {
	decodeFuzz(f, func(t *testing.T, req *secretdapi.CredentialDeleteRequest) { _ = credential.ValidName(req.Name) })
}

func FuzzCredentialList(f *testing.F) { decodeFuzz[emptyRequest](f, nil) }

func FuzzLeaseStage(f *testing.F) {
	reg, table := fuzzEnv(f)
	decodeFuzz(f, func(t *testing.T, req *secretdapi.LeaseStageRequest) {
		if checkInvocation(req.Invocation) != nil {
			return
		}
		d, err := ttl(req.TTLMS)
		if err != nil || checkPlaceholder(req.Placeholder, map[string]any{}) != nil {
			return
		}
		_ = reg.With(req.Credential, func(meta *secretdapi.CredentialMeta, value []byte) error {
			spec, err := choose(meta, req)
			if err != nil {
				return err
			}
			spec.TTL, spec.Invocation, spec.Placeholder = d, req.Invocation, req.Placeholder
			table.Revoke(spec.Invocation, "")
			_, err = table.Stage(spec, value)
			return err
		})
	})
}

func FuzzLeaseConsume(f *testing.F) {
	_, table := fuzzEnv(f)
	decodeFuzz(f, func(t *testing.T, req *secretdapi.LeaseConsumeRequest) {
		res, err := table.Consume(req.Invocation, req.Handles, sock.Peer{})
		if err == nil && res.Err() == nil && len(req.Handles) > 0 {
			t.Fatal("consumed from an empty table")
		}
	})
}

func FuzzLeaseLookup(f *testing.F) {
	_, table := fuzzEnv(f)
	decodeFuzz(f, func(t *testing.T, req *secretdapi.LeaseLookupRequest) {
		if _, _, err := table.Lookup(req.Handle); err == nil {
			t.Fatal("found a lease in an empty table")
		}
	})
}

func FuzzLeaseRevoke(f *testing.F) {
	decodeFuzz(f, func(t *testing.T, req *secretdapi.LeaseRevokeRequest) {
		_ = checkInvocation(req.Invocation)
		_ = checkOwner(req.Owner, map[string]any{})
	})
}

func FuzzLeaseList(f *testing.F) {
	_, table := fuzzEnv(f)
	decodeFuzz(f, func(t *testing.T, req *secretdapi.LeaseListRequest) { _ = table.List(req.Invocation, req.Owner) })
}
