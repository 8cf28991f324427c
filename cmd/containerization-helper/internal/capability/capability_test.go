package capability

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

func mustNew(t *testing.T, passed ...string) *Snapshot {
	t.Helper()
	s, err := New("runc", "1.1.5", "runc-1.1", "cgroup-hybrid", Suite, passed)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The digest is over the canonical encoding, so the order and repetition
// of the evidence given do not change it; different evidence does.
func TestDigestStableAcrossOrder(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := mustNew(t, "state", "create", "kill", "killsig", "kill_no_effect")
	b := mustNew(t, "kill_no_effect", "killsig", "state", "kill", "create", "state", "create")
	is.Equal(a.Digest(), b.Digest())
	is.Equal(a.Canonical(), b.Canonical())
	is.Equal(a.Passed(), []string{"create", "kill", "kill_no_effect", "killsig", "state"})
	is.Equal(a.Capabilities(), []string{"lifecycle.create", "lifecycle.kill", "state"})
	c := mustNew(t, "state", "create", "kill", "killsig")
	is.True(c.Digest() != a.Digest())
	is.True(strings.HasPrefix(a.Digest(), "sha256:") && len(a.Digest()) == len("sha256:")+64)
}

// The encoding is hostkit's canonical MessagePack: it validates, and it is
// what lib/wire's encoder makes of the same map (keys sorted, empty lists
// omitted). The pinned digest catches any change of the bytes.
func TestCanonicalEncoding(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustNew(t, "create", "state")
	is.NoErr(wire.Validate(s.Canonical(), wire.Limits{}))
	want, err := wire.Marshal(map[string]any{
		"capabilities": []string{"lifecycle.create", "state"}, "codec": "runc-1.1",
		"host_kind": "cgroup-hybrid", "passed": []string{"create", "state"}, "provider": "runc",
		"suite": Suite, "version": "1.1.5",
	})
	is.NoErr(err)
	is.Equal(s.Canonical(), want)
	is.Equal(s.Digest(), "sha256:6355317fc0a05a34ff30e6d11da02ccd3e9ab67da2de48bee8a51e2830151343")

	empty := mustNew(t)
	want, err = wire.Marshal(map[string]any{"codec": "runc-1.1", "host_kind": "cgroup-hybrid",
		"provider": "runc", "suite": Suite, "version": "1.1.5"})
	is.NoErr(err)
	is.Equal(empty.Canonical(), want) // no evidence: no "passed", no "capabilities"
}

// Nothing a caller gets from a snapshot can change it.
func TestImmutable(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustNew(t, "create", "state")
	d := s.Digest()
	s.Passed()[0] = "x"
	s.Capabilities()[0] = "x"
	s.Canonical()[0] = 0
	is.Equal(s.Passed(), []string{"create", "state"})
	is.Equal(s.Capabilities(), []string{"lifecycle.create", "state"})
	is.NoErr(wire.Validate(s.Canonical(), wire.Limits{}))
	is.Equal(s.Digest(), d)
	all := All()
	all[0].Requires[0].Test = "x"
	is.True(All()[0].Requires[0].Test != "x")
}

func TestRequire(t *testing.T) {
	t.Parallel()
	s := mustNew(t, "create", "state", "start")
	tests := []struct {
		name    string
		caps    []string
		refused []string // named in the message
	}{
		{name: "nothing", caps: nil},
		{name: "all present", caps: []string{"lifecycle.create", "state", "lifecycle.start"}},
		{name: "one missing", caps: []string{"lifecycle.create", "lifecycle.delete"}, refused: []string{"lifecycle.delete"}},
		{name: "several missing", caps: []string{"linux.cgroups.memory", "state", "hooks"}, refused: []string{"linux.cgroups.memory", "hooks"}},
		{name: "unknown", caps: []string{"state", "lifecycle.teleport"}, refused: []string{"unknown capability lifecycle.teleport"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			err := s.Require(tt.caps...)
			if tt.refused == nil {
				is.NoErr(err)
				return
			}
			is.Equal(wire.CodeOf(err), CodeUnavailable)
			is.Equal(wire.AsError(err).Retry, wire.RetryNever)
			for _, r := range tt.refused {
				is.True(strings.Contains(err.Error(), r))
			}
			is.True(strings.Contains(err.Error(), s.Digest()))
		})
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, codec, kind string
		ok                bool
	}{
		{name: "runc hybrid", codec: "runc-1.1", kind: "cgroup-hybrid", ok: true},
		{name: "crun hybrid", codec: "crun-1.8", kind: "cgroup-hybrid", ok: true},
		{name: "unknown version", codec: "runc-1.2", kind: "cgroup-hybrid"},
		{name: "unknown host kind", codec: "runc-1.1", kind: "cgroup-v3"},
		{name: "no snapshot for host kind", codec: "runc-1.1", kind: "cgroup-v2"},
		{name: "traversal", codec: "../snapshots/runc-1.1", kind: "cgroup-hybrid"},
		{name: "empty", codec: "", kind: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			s, err := Lookup(tt.codec, tt.kind)
			if !tt.ok {
				is.Equal(wire.CodeOf(err), CodeUnavailable)
				is.True(s == nil)
				return
			}
			is.NoErr(err)
			is.Equal(s.Codec(), tt.codec)
			is.Equal(s.HostKind(), tt.kind)
			is.Equal(s.Suite(), Suite)
			is.NoErr(s.Require("lifecycle.create", "lifecycle.start", "lifecycle.kill", "lifecycle.delete", "state"))
		})
	}
}

// Every embedded file decodes strictly and is exactly its own canonical
// file form; any edit that is not a regeneration is refused.
func TestEmbeddedDecodeStrictly(t *testing.T) {
	t.Parallel()
	names, err := Embedded()
	if err != nil || len(names) == 0 {
		t.Fatalf("no embedded snapshots: %v", err)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			b, err := snapshots.ReadFile("snapshots/" + name)
			is.NoErr(err)
			s, err := DecodeFile(b)
			is.NoErr(err)
			is.Equal(FileName(s.Codec(), s.HostKind()), name)
			is.Equal(s.File(), b)
			is.True(len(s.Capabilities()) > 0)
			first := s.Passed()[0]
			mutations := map[string][]byte{
				"unknown field":   bytes.Replace(b, []byte(`"provider":`), []byte(`"extra": 1, "provider":`), 1),
				"duplicate key":   bytes.Replace(b, []byte(`"provider":`), []byte(`"suite": "x", "provider":`), 1),
				"wrong digest":    bytes.Replace(b, []byte(s.Digest()), []byte("sha256:"+strings.Repeat("0", 64)), 1),
				"added cap":       bytes.Replace(b, []byte(`"capabilities": [`), []byte(`"capabilities": ["hooks", `), 1),
				"dropped cap":     bytes.Replace(b, []byte(`"`+s.Capabilities()[0]+`",`), nil, 1),
				"duplicate entry": bytes.Replace(b, []byte(`"`+first+`",`), []byte(`"`+first+`", "`+first+`",`), 1),
				"compact layout":  bytes.ReplaceAll(b, []byte("\n  "), []byte("\n")),
				"trailing data":   append(bytes.Clone(b), []byte("{}\n")...),
				"oversize":        append(bytes.Clone(b), bytes.Repeat([]byte(" "), MaxFileSize)...),
				"other version":   bytes.Replace(b, []byte(`"version": "`+s.Version()), []byte(`"version": "9`+s.Version()), 1),
			}
			for what, m := range mutations {
				is.True(!bytes.Equal(m, b)) // the mutation applied
				_, err := DecodeFile(m)
				if err == nil {
					t.Errorf("%s: accepted", what)
				}
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                                 string
		provider, version, codec, kind, suit string
		passed                               []string
	}{
		{name: "provider", provider: "Runc!", version: "1.1.5", codec: "runc-1.1", kind: "cgroup-v2", suit: Suite},
		{name: "version", provider: "runc", version: "latest", codec: "runc-1.1", kind: "cgroup-v2", suit: Suite},
		{name: "codec of another provider", provider: "runc", version: "1.1.5", codec: "crun-1.1", kind: "cgroup-v2", suit: Suite},
		{name: "codec with patch", provider: "runc", version: "1.1.5", codec: "runc-1.1.5", kind: "cgroup-v2", suit: Suite},
		{name: "host kind", provider: "runc", version: "1.1.5", codec: "runc-1.1", kind: "hybrid", suit: Suite},
		{name: "suite", provider: "runc", version: "1.1.5", codec: "runc-1.1", kind: "cgroup-v2", suit: "runtime-tools v0.8.0"},
		{name: "unknown test", provider: "runc", version: "1.1.5", codec: "runc-1.1", kind: "cgroup-v2", suit: Suite, passed: []string{"teleport"}},
		{name: "unmapped check", provider: "runc", version: "1.1.5", codec: "runc-1.1", kind: "cgroup-v2", suit: Suite, passed: []string{"start/anything"}},
		{name: "check of a whole test", provider: "runc", version: "1.1.5", codec: "runc-1.1", kind: "cgroup-v2", suit: Suite,
			passed: []string{"start", "start" + CheckSep + startChecks[0]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tt.provider, tt.version, tt.codec, tt.kind, tt.suit, tt.passed)
			is.New(t).True(err != nil)
		})
	}
}

// Partial requirements count their named checks only, and every one of
// them; a whole test still satisfies them.
func TestEvidenceAndDerive(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	checks := map[string][]string{"start": append(slices.Clone(startChecks), "exit status 1")}
	ev := Evidence([]string{"create"}, checks)
	is.True(slices.Contains(ev, "start"+CheckSep+startChecks[0]))
	is.True(!slices.Contains(ev, "start"+CheckSep+"exit status 1")) // not named by the map
	is.Equal(Derive(ev), []string{"lifecycle.create", "lifecycle.start"})

	checks["start"] = startChecks[1:] // one named check did not pass
	is.Equal(Derive(Evidence([]string{"create"}, checks)), []string{"lifecycle.create"})

	ev = Evidence([]string{"start"}, checks) // the whole test passed: no check entries
	is.Equal(ev, []string{"start"})
	is.Equal(Derive(ev), []string{"lifecycle.start"})

	// linux.cgroups.memory needs both memory tests' checks.
	mem := map[string][]string{"linux_cgroups_memory": memoryChecks}
	is.True(!slices.Contains(Derive(Evidence(nil, mem)), "linux.cgroups.memory"))
	mem["linux_cgroups_relative_memory"] = memoryChecks
	is.True(slices.Contains(Derive(Evidence(nil, mem)), "linux.cgroups.memory"))
}

// The map is sorted, unique, names only tests of the suite, and explains
// every partial requirement.
func TestCatalog(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.True(slices.IsSorted(suiteTests))
	is.Equal(len(slices.Compact(slices.Clone(suiteTests))), len(suiteTests))
	for i, c := range catalog {
		if i > 0 && catalog[i-1].Name >= c.Name {
			t.Errorf("catalog not sorted/unique at %s", c.Name)
		}
		is.True(Known(c.Name))
		is.True(c.Doc != "" && len(c.Requires) > 0)
		for _, r := range c.Requires {
			if _, ok := slices.BinarySearch(suiteTests, r.Test); !ok {
				t.Errorf("%s requires unknown test %s", c.Name, r.Test)
			}
			if len(r.Checks) > 0 && r.Why == "" {
				t.Errorf("%s: partial requirement on %s without Why", c.Name, r.Test)
			}
			if len(slices.Compact(slices.Sorted(slices.Values(r.Checks)))) != len(r.Checks) {
				t.Errorf("%s: repeated check in %s", c.Name, r.Test)
			}
		}
	}
	is.True(!Known("lifecycle"))
	is.True(slices.IsSorted(HostKinds))
	is.True(slices.IsSorted(Codes))
}

// Every code is listed in docs/protocol.md: codes are API.
func TestCodesDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Codes {
		if !bytes.Contains(doc, []byte("`"+c+"`")) {
			t.Errorf("docs/protocol.md does not list %s", c)
		}
	}
}
