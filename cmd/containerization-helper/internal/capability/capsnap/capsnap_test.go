package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/cmd/containerization-helper/internal/capability"
)

// writeResults writes a results file covering the whole suite in which
// the tests in pass passed; edit may change the document first.
func writeResults(t *testing.T, dir string, pass []string, edit func(map[string]any)) string {
	t.Helper()
	var tests []map[string]any
	for _, n := range capability.SuiteTests() {
		passed := false
		for _, p := range pass {
			passed = passed || p == n
		}
		tests = append(tests, map[string]any{"name": n, "passed": passed, "passed_checks": []string{}, "checks": 1})
	}
	doc := map[string]any{"schema": ResultsSchema, "suite": capability.Suite, "provider": "runc", "version": "1.1.5",
		"codec": "runc-1.1", "host_kind": "cgroup-v2", "duration_ms": 1, "tests": tests}
	if edit != nil {
		edit(doc)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "results.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestWriteThenCheck(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir, snaps := t.TempDir(), t.TempDir()
	res := writeResults(t, dir, []string{"create", "state"}, nil)
	var out bytes.Buffer
	code, err := run(context.Background(), []string{"-dir", snaps, res}, &out)
	is.Equal(code, 1) // no snapshot yet: differs
	is.True(err != nil)
	is.True(strings.Contains(out.String(), "runc-1.1-cgroup-v2.json is missing"))

	code, err = run(context.Background(), []string{"-dir", snaps, "-write", res}, &out)
	is.NoErr(err)
	is.Equal(code, 0)
	b, err := os.ReadFile(filepath.Join(snaps, "runc-1.1-cgroup-v2.json"))
	is.NoErr(err)
	s, err := capability.DecodeFile(b)
	is.NoErr(err)
	is.Equal(s.Capabilities(), []string{"lifecycle.create", "state"})

	out.Reset()
	code, err = run(context.Background(), []string{"-dir", snaps, res}, &out)
	is.NoErr(err)
	is.Equal(code, 0)
	is.True(strings.Contains(out.String(), "up to date"))

	// Reality changed: the check fails and names the difference.
	res = writeResults(t, dir, []string{"create"}, nil)
	out.Reset()
	code, _ = run(context.Background(), []string{"-dir", snaps, res}, &out)
	is.Equal(code, 1)
	is.True(strings.Contains(out.String(), "- capability state"))
	is.True(strings.Contains(out.String(), "- passed state"))
}

func TestBadResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(map[string]any)
	}{
		{name: "schema", edit: func(d map[string]any) { d["schema"] = "other" }},
		{name: "partial run", edit: func(d map[string]any) { d["partial"] = true }},
		{name: "missing test", edit: func(d map[string]any) { d["tests"] = d["tests"].([]map[string]any)[1:] }},
		{name: "suite", edit: func(d map[string]any) { d["suite"] = "runtime-tools v0.8.0" }},
		{name: "codec", edit: func(d map[string]any) { d["codec"] = "crun-1.8" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			res := writeResults(t, t.TempDir(), nil, tt.edit)
			code, err := run(context.Background(), []string{"-dir", t.TempDir(), "-write", res}, &bytes.Buffer{})
			is.Equal(code, 2)
			is.True(err != nil)
		})
	}
}
