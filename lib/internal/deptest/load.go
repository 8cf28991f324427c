package deptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Modules returns the directory of every module under root (a directory
// holding go.mod), sorted. Like the go command it skips testdata, vendor
// and directories whose name starts with "." or "_"; it skips node_modules
// too, which holds no Go.
func Modules(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || name == "vendor" || name == "node_modules" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == "go.mod" {
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("deptest.Modules: %w", err)
	}
	slices.Sort(dirs)
	return dirs, nil
}

// listed is the part of `go list -json` output Load reads.
type listed struct {
	ImportPath string
	ForTest    string
	Standard   bool
	Module     *struct {
		Path string
		Main bool
	}
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// listFields are the fields Load asks go list for: naming them spares go
// list working out the rest (staleness, for one, hashes every file).
const listFields = "ImportPath,ForTest,Standard,Module,Imports,TestImports,XTestImports"

// Load returns the packages of the module in dir, each with the direct
// imports of its files and tests, as the go command sees them when
// building for goos. It runs `go list -deps -test` in dir with GOWORK=off,
// so that the module is read with its own go.mod as CI builds it alone;
// the go command must be on PATH and the module's dependencies in the
// module cache or reachable. It fails if go list does, or if an import
// cannot be placed in a module.
func Load(ctx context.Context, dir, goos string) ([]Package, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-test", "-json="+listFields, "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOOS="+goos, "GOFLAGS=-mod=readonly")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("deptest.Load: go list in %s (GOOS=%s): %w: %s", dir, goos, err, bytes.TrimSpace(stderr.Bytes()))
	}
	pkgs, err := parse(bytes.NewReader(out))
	if err != nil {
		return nil, fmt.Errorf("deptest.Load: %s (GOOS=%s): %w", dir, goos, err)
	}
	return pkgs, nil
}

// parse reads the JSON stream of `go list -deps -test -json`: every
// package the main module's packages and tests need, including test
// variants ("p [p.test]"), external test packages ("p_test [p.test]") and
// generated test mains ("p.test"). It returns the main module's plain
// packages, with their test imports (TestImports, XTestImports) folded in.
func parse(r io.Reader) ([]Package, error) {
	var all []listed
	module := map[string]string{} // import path -> module path, "" for std
	dec := json.NewDecoder(r)
	for {
		var l listed
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decoding go list output: %w", err)
		}
		path, _, _ := strings.Cut(l.ImportPath, " ")
		switch {
		case l.Standard:
			module[path] = ""
		case l.Module != nil:
			module[path] = l.Module.Path
		}
		all = append(all, l)
	}
	var pkgs []Package
	for _, l := range all {
		// Test variants repeat a plain package; a test main is generated.
		if l.Module == nil || !l.Module.Main || l.ForTest != "" ||
			strings.Contains(l.ImportPath, " ") || strings.HasSuffix(l.ImportPath, ".test") {
			continue
		}
		p := Package{Path: l.ImportPath, Module: l.Module.Path}
		seen := map[string]bool{}
		add := func(paths []string, test bool) error {
			for _, imp := range paths {
				if imp == "C" || seen[imp] {
					continue // cgo's pseudo-package; or already there from non-test files
				}
				mod, ok := module[imp]
				if !ok {
					return fmt.Errorf("%s imports %s, which go list did not list", l.ImportPath, imp)
				}
				seen[imp] = true
				p.Imports = append(p.Imports, Import{Path: imp, Module: mod, Test: test})
			}
			return nil
		}
		if err := errors.Join(add(l.Imports, false), add(l.TestImports, true), add(l.XTestImports, true)); err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}
