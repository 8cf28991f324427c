package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"hostkit.dev/cmd/containerization-helper/internal/capability"
)

// reconcile compares s with its checked-in file (or writes it with -write)
// and reports whether they were the same.
func reconcile(cfg config, s *capability.Snapshot, out io.Writer) (bool, error) {
	name := capability.FileName(s.Codec(), s.HostKind())
	path := filepath.Join(cfg.dir, name)
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	want := s.File()
	if bytes.Equal(old, want) {
		fmt.Fprintf(out, "capsnap: %s up to date (%d capabilities, %s)\n", name, len(s.Capabilities()), s.Digest())
		return true, nil
	}
	diff(out, name, old, s)
	if !cfg.write {
		return false, nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, want, 0o644); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return false, err
	}
	fmt.Fprintf(out, "capsnap: wrote %s (%s)\n", path, s.Digest())
	return true, nil
}

// diff prints what changed between the checked-in file and s.
func diff(out io.Writer, name string, old []byte, s *capability.Snapshot) {
	if old == nil {
		fmt.Fprintf(out, "capsnap: %s is missing; this run grants %v\n", name, s.Capabilities())
		return
	}
	prev, err := capability.DecodeFile(old)
	if err != nil {
		fmt.Fprintf(out, "capsnap: %s does not decode (%v)\n", name, err)
		return
	}
	fmt.Fprintf(out, "capsnap: %s differs from this run (%s -> %s):\n", name, prev.Digest(), s.Digest())
	if prev.Version() != s.Version() {
		fmt.Fprintf(out, "  version %s -> %s\n", prev.Version(), s.Version())
	}
	list := func(what string, a, b []string) {
		for _, x := range b {
			if !slices.Contains(a, x) {
				fmt.Fprintf(out, "  + %s %s\n", what, x)
			}
		}
		for _, x := range a {
			if !slices.Contains(b, x) {
				fmt.Fprintf(out, "  - %s %s\n", what, x)
			}
		}
	}
	list("capability", prev.Capabilities(), s.Capabilities())
	list("passed", prev.Passed(), s.Passed())
}
