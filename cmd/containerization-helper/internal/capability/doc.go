// Package capability turns what an OCI runtime passed in the conformance
// suite (github.com/opencontainers/runtime-tools v0.9.0 validation, run by
// the harness in conformance/ at the repository root) into an immutable,
// canonically encoded snapshot with a SHA-256 digest, and refuses an op that
// needs a capability the snapshot lacks before anything runs
// (CodeUnavailable, "capability.unavailable").
//
// The pieces:
//
//   - All is the reviewed map from named capabilities ("lifecycle.start",
//     "linux.cgroups.memory", ...) to the conformance tests that evidence
//     them. A capability is present only if every one of its requirements
//     passed. A requirement is a whole test, or, where a test mixes what
//     the capability needs with an unrelated case that cannot pass, the
//     named TAP checks of that test (each such requirement says why in
//     Requirement.Why). The harness counts a test that runs zero checks as
//     a failure, so a test that evidences nothing grants nothing.
//   - Snapshot records the provider, its exact version and codec line
//     ("runc-1.1"), the host kind ("cgroup-hybrid"), the suite, the evidence
//     (Passed) and the capabilities derived from it. Its canonical encoding
//     is hostkit's canonical MessagePack (lib/wire, docs/protocol.md,
//     "Canonical encoding"); Digest is "sha256:" + the hex SHA-256 of those
//     bytes.
//   - Lookup finds the checked-in snapshot for a (codec, host kind) pair in
//     snapshots/ (embedded). `scripts/conformance` regenerates those files
//     from a real run (capsnap -write) and, in its normal mode, fails when a
//     run no longer produces the checked-in snapshot.
//
// Reference: the OCI runtime spec v1.0 (runtime.md, config.md,
// config-linux.md) and runtime-tools' validation/ programs, whose TAP check
// descriptions name the requirements below.
package capability
