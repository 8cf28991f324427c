package capability

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"hostkit.dev/lib/wire"
)

// CodeUnavailable: the provider's snapshot lacks a capability an op needs,
// names an unknown capability, or there is no valid snapshot for the
// provider's codec and host kind. Nothing was executed. Retry never.
const CodeUnavailable = "capability.unavailable"

// Codes lists this package's error codes, sorted; docs/protocol.md lists
// each one (TestCodesDocumented).
var Codes = []string{CodeUnavailable}

// HostKinds are the host kinds a snapshot may name, as provider.Info
// reports them: the cgroup layout decides what runtimes can do.
var HostKinds = []string{"cgroup-hybrid", "cgroup-v1", "cgroup-v2"}

var (
	reProvider = regexp.MustCompile(`^[a-z][a-z0-9]{0,31}$`)
	reVersion  = regexp.MustCompile(`^[0-9]+(\.[0-9]+){1,3}([+~-][0-9A-Za-z.+~-]{1,40})?$`)
	reCodec    = regexp.MustCompile(`^([a-z][a-z0-9]{0,31})-[0-9]{1,4}\.[0-9]{1,4}$`)
)

// Snapshot is what one provider (runtime, exact version, codec line) passed
// in Suite on one host kind, and the capabilities that grants. It is
// immutable: fields are read through methods that return copies, and the
// canonical encoding and digest are fixed at construction.
type Snapshot struct {
	provider, version, codec, hostKind, suite string
	passed, caps                              []string
	canonical                                 []byte
	digest                                    string
}

// New validates and builds a snapshot. passed is Evidence's output (order
// and duplicates do not matter: New sorts and deduplicates); Capabilities
// are derived from it, never given. provider is a runtime name ("runc"),
// version its exact version ("1.1.5"), codec the provider's codec line
// ("runc-1.1", prefixed by provider), hostKind one of HostKinds, suite
// must be Suite. A Passed entry names a test of SuiteTests, or a check of
// one that a partial requirement names (and then the test's own entry must
// be absent). Errors are plain (the caller maps them).
func New(provider, version, codec, hostKind, suite string, passed []string) (*Snapshot, error) {
	switch {
	case !reProvider.MatchString(provider):
		return nil, fmt.Errorf("capability.New: provider %q is not a runtime name", provider)
	case !reVersion.MatchString(version):
		return nil, fmt.Errorf("capability.New: version %q is not an exact version", version)
	case !reCodec.MatchString(codec) || !strings.HasPrefix(codec, provider+"-"):
		return nil, fmt.Errorf("capability.New: codec %q is not a %s codec line", codec, provider)
	case !slices.Contains(HostKinds, hostKind):
		return nil, fmt.Errorf("capability.New: unknown host kind %q", hostKind)
	case suite != Suite:
		return nil, fmt.Errorf("capability.New: suite %q is not %q", suite, Suite)
	}
	p := slices.Clone(passed)
	slices.Sort(p)
	p = slices.Compact(p)
	if err := checkEvidence(p); err != nil {
		return nil, err
	}
	s := &Snapshot{provider: provider, version: version, codec: codec, hostKind: hostKind,
		suite: suite, passed: p, caps: Derive(p)}
	s.canonical = s.encode()
	sum := sha256.Sum256(s.canonical)
	s.digest = "sha256:" + hex.EncodeToString(sum[:])
	return s, nil
}

// checkEvidence refuses entries Evidence could not have produced.
func checkEvidence(sorted []string) error {
	partial := map[string]bool{}
	for _, c := range catalog {
		for _, r := range c.Requires {
			for _, ch := range r.Checks {
				partial[r.Test+CheckSep+ch] = true
			}
		}
	}
	for _, e := range sorted {
		test, check, isCheck := strings.Cut(e, CheckSep)
		if _, ok := slices.BinarySearch(suiteTests, test); !ok {
			return fmt.Errorf("capability.New: passed entry %q names no test of the suite", e)
		}
		if !isCheck {
			continue
		}
		if check == "" || !partial[e] {
			return fmt.Errorf("capability.New: passed entry %q names no check of the capability map", e)
		}
		if _, whole := slices.BinarySearch(sorted, test); whole {
			return fmt.Errorf("capability.New: passed entry %q repeats a check of a test that passed whole", e)
		}
	}
	return nil
}

// encode returns the canonical MessagePack map (docs/protocol.md, "Canonical
// encoding"): keys in bytewise order, shortest headers, empty lists omitted.
// Built by hand so the bytes never depend on a struct's layout.
func (s *Snapshot) encode() []byte {
	type kv struct {
		k string
		s string
		l []string
	}
	fields := []kv{
		{k: "capabilities", l: s.caps}, {k: "codec", s: s.codec}, {k: "host_kind", s: s.hostKind},
		{k: "passed", l: s.passed}, {k: "provider", s: s.provider}, {k: "suite", s: s.suite},
		{k: "version", s: s.version},
	}
	fields = slices.DeleteFunc(fields, func(f kv) bool { return f.s == "" && len(f.l) == 0 })
	b := wire.AppendMapHeader(nil, len(fields))
	for _, f := range fields {
		b = wire.AppendStr(b, f.k)
		if f.l == nil {
			b = wire.AppendStr(b, f.s)
			continue
		}
		b = wire.AppendArrayHeader(b, len(f.l))
		for _, v := range f.l {
			b = wire.AppendStr(b, v)
		}
	}
	return b
}

// Provider is the runtime's name ("runc").
func (s *Snapshot) Provider() string { return s.provider }

// Version is the runtime's exact version the suite ran against ("1.1.5").
func (s *Snapshot) Version() string { return s.version }

// Codec is the provider's codec line ("runc-1.1").
func (s *Snapshot) Codec() string { return s.codec }

// HostKind is the host kind the suite ran on ("cgroup-hybrid").
func (s *Snapshot) HostKind() string { return s.hostKind }

// Suite is the conformance suite (Suite).
func (s *Snapshot) Suite() string { return s.suite }

// Passed returns a copy of the evidence, sorted.
func (s *Snapshot) Passed() []string { return slices.Clone(s.passed) }

// Capabilities returns a copy of the capabilities, sorted.
func (s *Snapshot) Capabilities() []string { return slices.Clone(s.caps) }

// Has reports whether the snapshot grants capability name.
func (s *Snapshot) Has(name string) bool {
	_, ok := slices.BinarySearch(s.caps, name)
	return ok
}

// Canonical returns a copy of the canonical MessagePack encoding.
func (s *Snapshot) Canonical() []byte { return slices.Clone(s.canonical) }

// Digest is "sha256:" + the lowercase hex SHA-256 of Canonical: what a
// request planned against this snapshot carries.
func (s *Snapshot) Digest() string { return s.digest }

// Require returns nil when the snapshot grants every one of caps, else a
// *wire.Error with CodeUnavailable (retry never) naming each missing or
// unknown capability, the provider, host kind and snapshot digest. Call it
// before executing anything.
func (s *Snapshot) Require(caps ...string) error {
	var missing, unknown []string
	for _, c := range caps {
		switch {
		case !Known(c):
			unknown = append(unknown, c)
		case !s.Has(c):
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 && len(unknown) == 0 {
		return nil
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("%s %s on %s lacks capability %s", s.provider, s.version, s.hostKind, strings.Join(missing, ", ")))
	}
	if len(unknown) > 0 {
		parts = append(parts, "unknown capability "+strings.Join(unknown, ", "))
	}
	return &wire.Error{Code: CodeUnavailable, Msg: strings.Join(parts, "; ") + " (snapshot " + s.digest + ")", Retry: wire.RetryNever}
}
