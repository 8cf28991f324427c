package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// ToolsModule is the conformance suite's module; the harness's go.mod pins
// it and lists each validation program (and runtimetest) as a `tool`.
const ToolsModule = "github.com/opencontainers/runtime-tools"

// Suite is the built conformance suite.
type Suite struct {
	Name  string   // "opencontainers/runtime-tools v0.9.0"
	Bin   string   // the tests' working directory: runtimetest and the rootfs tarball
	Tests []string // validation test names, sorted
	// Programs maps a test to its executable, built and kept by the go
	// command's cache (`go tool -n`), so a second run builds nothing.
	Programs map[string]string
	// FixedCgroup marks the tests that put their container at one of the
	// suite's fixed cgroup paths (their source calls SetLinuxCgroupsPath):
	// two of them must never run at once.
	FixedCgroup map[string]bool
}

// goCmd runs the go command in the harness's module, outside any
// workspace (runtime-tools v0.9.0 predates modules and is not in go.work).
func goCmd(ctx context.Context, modDir string, extraEnv []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = modDir
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly"), extraEnv...)
	return cmd
}

func goOutput(ctx context.Context, modDir string, env []string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := goCmd(ctx, modDir, env, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Build finds the suite in the module cache, checks that go.mod lists
// every validation program (and runtimetest) as a tool, has the go
// command build each one into its cache (runtimetest statically: it runs
// inside the test rootfs), and puts runtimetest and the rootfs tarball in
// bin, where the validation programs expect them.
func Build(ctx context.Context, modDir, bin string, log io.Writer) (*Suite, error) {
	out, err := goOutput(ctx, modDir, nil, "list", "-m", "-f", "{{.Dir}} {{.Version}}", ToolsModule)
	if err != nil {
		return nil, err
	}
	src, version, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	ents, err := os.ReadDir(filepath.Join(src, "validation"))
	if err != nil {
		return nil, err
	}
	s := &Suite{Name: "opencontainers/runtime-tools " + version, Bin: bin, Programs: map[string]string{}, FixedCgroup: map[string]bool{}}
	for _, e := range ents {
		if !e.IsDir() || e.Name() == "util" {
			continue
		}
		code, err := os.ReadFile(filepath.Join(src, "validation", e.Name(), e.Name()+".go"))
		if err != nil {
			continue // not a test program
		}
		s.Tests = append(s.Tests, e.Name())
		s.FixedCgroup[e.Name()] = bytes.Contains(code, []byte("SetLinuxCgroupsPath"))
	}
	slices.Sort(s.Tests)
	runtimetest := ToolsModule + "/cmd/runtimetest"
	pkgs := []string{runtimetest}
	for _, t := range s.Tests {
		pkgs = append(pkgs, ToolsModule+"/validation/"+t)
	}
	if err := checkTools(ctx, modDir, pkgs); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "conformance: building %d validation programs and runtimetest from %s@%s\n", len(s.Tests), ToolsModule, version)
	paths, err := buildTools(ctx, modDir, pkgs)
	if err != nil {
		return nil, err
	}
	for i, t := range s.Tests {
		s.Programs[t] = paths[i+1]
	}
	if err := copyFile(paths[0], filepath.Join(bin, "runtimetest"), 0o755); err != nil {
		return nil, err
	}
	tarball := "rootfs-" + runtime.GOARCH + ".tar.gz"
	return s, copyFile(filepath.Join(src, tarball), filepath.Join(bin, tarball), 0o644)
}

// buildTools runs `go tool -n` for each package, four at a time (a
// cached tool costs a module load, not a build), and returns the cached executables' paths in order. Every
// build is static (CGO_ENABLED=0): runtimetest must be, and the validation
// programs need no cgo.
func buildTools(ctx context.Context, modDir string, pkgs []string) ([]string, error) {
	paths := make([]string, len(pkgs))
	errs := make([]error, len(pkgs))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, pkg := range pkgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out, err := goOutput(ctx, modDir, []string{"CGO_ENABLED=0"}, "tool", "-n", pkg)
			p := strings.TrimSpace(string(out))
			if err == nil && (!filepath.IsAbs(p) || strings.ContainsAny(p, " \n")) {
				err = fmt.Errorf("go tool -n %s: unexpected output %q", pkg, p)
			}
			paths[i], errs[i] = p, err
		}()
	}
	wg.Wait()
	return paths, errors.Join(errs...)
}

func copyFile(from, to string, mode os.FileMode) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, mode)
}

// checkTools makes sure go.mod's tool directives name exactly pkgs, so
// the module keeps requiring what the harness builds (go mod tidy keeps
// what tools need) and a new suite version cannot add a test silently.
func checkTools(ctx context.Context, modDir string, pkgs []string) error {
	out, err := goOutput(ctx, modDir, nil, "mod", "edit", "-json")
	if err != nil {
		return err
	}
	var mod struct{ Tool []struct{ Path string } }
	if err := json.Unmarshal(out, &mod); err != nil {
		return fmt.Errorf("go mod edit -json: %w", err)
	}
	var tools []string
	for _, t := range mod.Tool {
		tools = append(tools, t.Path)
	}
	slices.Sort(tools)
	want := slices.Sorted(slices.Values(pkgs))
	if !slices.Equal(tools, want) {
		return fmt.Errorf("go.mod tool directives %v are not the suite's programs %v: run `go get -tool` for each", tools, want)
	}
	return nil
}
