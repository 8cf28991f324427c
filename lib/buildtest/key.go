package buildtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"hostkit.dev/lib/wire"
)

// target is one binary to build: where the go command runs, what it is
// given, and the build flags.
type target struct {
	pkg   string   // as the caller named it, for messages
	dir   string   // the go command's directory; "" = the current one
	arg   string   // the package argument: an import path or "."
	flags []string // build flags, -buildvcs=false first
}

// newTarget resolves pkg: a directory becomes the go command's working
// directory, an import path stays an argument.
func newTarget(pkg string, flags []string) (*target, error) {
	t := &target{pkg: pkg, arg: pkg, flags: append([]string{"-buildvcs=false"}, flags...)}
	if pkg == "." || pkg == ".." || filepath.IsAbs(pkg) || strings.HasPrefix(pkg, "./") || strings.HasPrefix(pkg, "../") {
		dir, err := filepath.Abs(pkg)
		if err != nil {
			return nil, wire.Wrap(CodeInvalid, "package directory: "+err.Error(), err)
		}
		t.dir, t.arg = dir, "."
	}
	return t, nil
}

// envKeys are the go environment settings that reach the linker but not
// the compiler, whose inputs the build IDs cover already; the toolchain
// and platform are listed too, though the build IDs cover them, so the
// key never rests on that alone.
var envKeys = []string{
	"GOVERSION", "GOROOT", "GOOS", "GOARCH", "GOAMD64", "GOARM64", "GOARM", "GO386",
	"CGO_ENABLED", "CGO_LDFLAGS", "CC", "CXX", "GOFLAGS", "GOEXPERIMENT", "GOWORK",
}

// keyVersion changes whenever what goes into a key does, so that entries
// of an older scheme are never mistaken for current ones.
const keyVersion = "buildtest key v1\n"

// key is a target's cache key and its binary's name.
type key struct {
	hash string // hex, 32 characters: the entry's directory name
	name string // the binary's file name
}

// listFormat prints a tab-separated line per package: "+" for a package
// named on the command line or "-" for a dependency, the import path,
// the build ID ("-" if none), the package name, a named package's
// dependencies (space-separated) and its directory (last: it may hold
// spaces).
const listFormat = "{{if .DepOnly}}-{{else}}+{{end}}\t{{.ImportPath}}\t{{or .BuildID \"-\"}}\t{{.Name}}\t" +
	"{{if not .DepOnly}}{{join .Deps \" \"}}{{end}}\t{{.Dir}}"

// keys returns the key of each target; all have the same flags. It asks
// the go command what it would link: `go list -deps -export` compiles
// (or finds in GOCACHE) every package of each binary and reports its
// build ID, whose content half is a hash of the compiled package —
// object code, not only export data, so a changed function body changes
// it even when no signature does. Every package's ID is needed, not only
// the main package's: a package's action ID covers the content IDs of
// its direct imports only, and an import whose object code did not
// change hides a change further down. The sorted IDs, hashed with the
// flags and envKeys, are everything the link reads.
//
// One go list covers all targets when the go command resolves them
// together (import paths, and directories of the workspace's modules),
// which costs little more than one go list for one binary; otherwise, as when the workspace is off and the directories
// are in different modules, each target gets a go list of its own in its
// directory.
//
// Errors: CodeBuild when go list or go env fail (a compile error, an
// unknown package), CodeInvalid when a package is not a main package.
func keys(ctx context.Context, ts []*target) ([]key, error) {
	if len(ts) > 1 {
		// In the current directory, or in the first directory if all
		// are directories: the tests that ask for several name them by
		// directory, and the workspace holds them all.
		all := &target{dir: ts[0].dir, flags: ts[0].flags}
		args := make([]string, len(ts))
		names := make([]string, len(ts))
		for i, t := range ts {
			args[i], names[i] = t.arg, t.pkg
			if t.dir == "" {
				all.dir = ""
			} else {
				args[i] = t.dir
			}
		}
		all.pkg = strings.Join(names, " ")
		if ks, err := all.listKeys(ctx, args); err == nil {
			return ks, nil
		}
	}
	out := make([]key, len(ts))
	for i, t := range ts {
		ks, err := t.listKeys(ctx, []string{t.arg})
		if err != nil {
			return nil, err
		}
		out[i] = ks[0]
	}
	return out, nil
}

// listPkg is a line of listFormat.
type listPkg struct {
	root                      bool
	importPath, buildID, name string
	deps                      []string
	dir                       string
}

// listKeys runs go list in t's directory for args and returns the key of
// each arg's package: with one arg, the one package named; with more,
// the package whose directory (an absolute arg) or import path is the
// arg.
func (t *target) listKeys(ctx context.Context, args []string) ([]key, error) {
	listArgs := append([]string{"list", "-deps", "-export", "-f", listFormat}, t.flags...)
	list, err := t.goCmd(ctx, append(listArgs, args...)...)
	if err != nil {
		return nil, err
	}
	env, err := t.goCmd(ctx, append([]string{"env"}, envKeys...)...)
	if err != nil {
		return nil, err
	}
	ids := map[string]string{} // import path → build ID
	var roots []listPkg
	for _, line := range strings.Split(strings.TrimSuffix(string(list), "\n"), "\n") {
		f := strings.SplitN(line, "\t", 6)
		if len(f) != 6 {
			return nil, wire.Errorf(CodeBuild, "go list %s: unexpected line %q", t.pkg, line)
		}
		p := listPkg{root: f[0] == "+", importPath: f[1], buildID: f[2], name: f[3], deps: strings.Fields(f[4]), dir: f[5]}
		ids[p.importPath] = p.buildID
		if p.root {
			roots = append(roots, p)
		}
	}
	if len(args) == 1 && len(roots) != 1 {
		return nil, wire.Errorf(CodeInvalid, "%s names %d packages, not one", t.pkg, len(roots))
	}
	out := make([]key, len(args))
	for i, arg := range args {
		var p *listPkg
		for j := range roots {
			if len(args) == 1 || roots[j].importPath == arg || (filepath.IsAbs(arg) && roots[j].dir == arg) {
				p = &roots[j]
				break
			}
		}
		if p == nil {
			return nil, wire.Errorf(CodeBuild, "go list %s: no package for %s", t.pkg, arg)
		}
		if p.name != "main" {
			return nil, wire.Errorf(CodeInvalid, "%s is not a main package", p.importPath)
		}
		pkgs := make([]string, 0, 1+len(p.deps))
		pkgs = append(pkgs, p.importPath+" "+p.buildID)
		for _, d := range p.deps {
			pkgs = append(pkgs, d+" "+ids[d])
		}
		slices.Sort(pkgs)
		h := sha256.New()
		h.Write([]byte(keyVersion))
		for _, f := range t.flags {
			h.Write([]byte("flag " + f + "\n"))
		}
		h.Write(env)
		for _, l := range pkgs {
			h.Write([]byte(l + "\n"))
		}
		out[i] = key{hash: hex.EncodeToString(h.Sum(nil)[:16]), name: path.Base(p.importPath)}
	}
	return out, nil
}

// goCmd runs the go command in t's directory and returns its standard
// output.
func (t *target) goCmd(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = t.dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, wire.Wrap(CodeBuild, "go "+args[0]+" "+t.pkg+": "+err.Error()+"\n"+stderr.String(), err)
	}
	return out, nil
}
