package harness

import (
	"encoding/json"
	"os"
)

// ResultsSchema names the results file format; capsnap
// (cmd/containerization-helper/internal/capability/capsnap) reads it and
// checks the name, so the two change together.
const ResultsSchema = "hostkit.conformance.results.v1"

// Results is one provider's run: the file the harness writes per provider
// (results-<codec>-<host kind>.json) and capsnap turns into a snapshot.
type Results struct {
	Schema     string       `json:"schema"`
	Suite      string       `json:"suite"` // "opencontainers/runtime-tools v0.9.0"
	Provider   string       `json:"provider"`
	Version    string       `json:"version"`
	Codec      string       `json:"codec"`
	HostKind   string       `json:"host_kind"`
	Wrapped    bool         `json:"wrapped,omitempty"` // ran inside the private-mount-namespace wrapper
	Partial    bool         `json:"partial,omitempty"` // -run selected a subset: no snapshot
	DurationMS int64        `json:"duration_ms"`
	Tests      []TestResult `json:"tests"`
}

// TestResult is one validation test against one provider.
type TestResult struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	// Race is set for a test its expected-failure list names as a race
	// (RacePrefix): its outcome is not judged and capsnap counts it as
	// failed, whatever Passed says.
	Race       bool   `json:"race,omitempty"`
	ZeroCheck  bool   `json:"zero_check,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	ExitCode   int    `json:"exit_code"`
	Checks     int    `json:"checks"` // ran (not SKIP)
	NotOK      int    `json:"not_ok"`
	Skipped    int    `json:"skipped"`
	DurationMS int64  `json:"duration_ms"`
	Reason     string `json:"reason,omitempty"`
	// PassedChecks: descriptions of checks that ran and passed every time.
	PassedChecks []string `json:"passed_checks"`
	FailedChecks []string `json:"failed_checks,omitempty"`
	StderrTail   string   `json:"stderr_tail,omitempty"`
	// RetriedAfter is set when this result is not of the test's first run
	// (attempt says when a test runs again): each earlier run's reason and
	// stderr tail, in order, kept so that a flake can be diagnosed.
	RetriedAfter string `json:"retried_after,omitempty"`
	// Leftovers counts containers the test left in its runtime root, which
	// the harness deleted (a failed test often leaves one).
	Leftovers int `json:"leftover_containers,omitempty"`
	// LeftoverMounts counts mounts the test left under its directory in
	// the host's mount namespace, which the harness detached.
	LeftoverMounts int `json:"leftover_mounts,omitempty"`
	// Cleanup lists what could not be cleaned up; any entry fails the run.
	Cleanup []string `json:"cleanup_problems,omitempty"`
}

// Write writes r as indented JSON to path (0644).
func (r *Results) Write(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
