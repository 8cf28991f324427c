package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"hostkit.dev/cmd/containerization-helper/internal/capability"
)

// ResultsSchema is the results file format the harness writes
// (conformance/internal/harness, results.go); both sides change together.
const ResultsSchema = "hostkit.conformance.results.v1"

// maxResults caps a results file (bytes) before it is parsed.
const maxResults = 16 << 20

type config struct {
	dir     string // snapshot directory
	write   bool
	results []string
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("capsnap", flag.ContinueOnError)
	var c config
	fs.StringVar(&c.dir, "dir", filepath.Join("internal", "capability", "snapshots"), "snapshot directory")
	fs.BoolVar(&c.write, "write", false, "rewrite the snapshot files instead of checking them")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.results = fs.Args()
	if len(c.results) == 0 {
		return c, errors.New("no results file given")
	}
	return c, nil
}

// results is the part of a results file capsnap reads; other fields are
// the harness's report and are ignored.
type results struct {
	Schema   string `json:"schema"`    // ResultsSchema; another is refused
	Suite    string `json:"suite"`     // the conformance suite run (capability.Suite)
	Provider string `json:"provider"`  // the runtime's name, e.g. "runc"
	Version  string `json:"version"`   // its exact version
	Codec    string `json:"codec"`     // its codec line, e.g. "runc-1.1"
	HostKind string `json:"host_kind"` // the host kind the run was on
	Partial  bool   `json:"partial"`   // the run was cut short: refused
	// Tests are the suite's tests as run: exactly capability.SuiteTests.
	Tests []struct {
		Name         string   `json:"name"`
		Passed       bool     `json:"passed"`
		Race         bool     `json:"race"` // outcome not judged: counted as failed
		PassedChecks []string `json:"passed_checks"`
	} `json:"tests"`
}

// fromResults reads a results file and builds its snapshot. The run must
// cover exactly the suite's tests, each once.
func fromResults(path string) (*capability.Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxResults+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxResults {
		return nil, fmt.Errorf("%s: over %d bytes", path, maxResults)
	}
	var r results
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Schema != ResultsSchema {
		return nil, fmt.Errorf("%s: schema %q, want %q", path, r.Schema, ResultsSchema)
	}
	if r.Partial {
		return nil, fmt.Errorf("%s: a partial run (-run) cannot make a snapshot", path)
	}
	var names, passed []string
	checks := map[string][]string{}
	for _, t := range r.Tests {
		names = append(names, t.Name)
		if t.Race {
			// A race's outcome is chance: no capability rests on it.
			continue
		}
		if t.Passed {
			passed = append(passed, t.Name)
		}
		checks[t.Name] = t.PassedChecks
	}
	slices.Sort(names)
	if !slices.Equal(names, capability.SuiteTests()) {
		return nil, fmt.Errorf("%s: the run's tests are not exactly the suite's (%d of %d)", path, len(names), len(capability.SuiteTests()))
	}
	s, err := capability.New(r.Provider, r.Version, r.Codec, r.HostKind, r.Suite, capability.Evidence(passed, checks))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
