package deptest

import (
	"cmp"
	"slices"
	"strings"
)

// The rules a [Violation] names. They are stable: a test matches on them.
const (
	// RuleCmdImportsOtherCmd: a package of hostkit.dev/cmd/X imports one
	// of hostkit.dev/cmd/Y. Binaries share code only through lib.
	RuleCmdImportsOtherCmd = "cmd-imports-other-cmd"
	// RuleLibImportsCmd: a package of hostkit.dev/lib imports one of
	// hostkit.dev/cmd.
	RuleLibImportsCmd = "lib-imports-cmd"
	// RuleAPIImport: a non-test file of a hostkit.dev/lib/api package
	// imports something other than the standard library, lib/wire, lib/rpc
	// or an entry of [Policy.APIExceptions].
	RuleAPIImport = "api-import"
	// RuleThirdParty: a package or test imports a module outside hostkit
	// that its module's entry of [Policy.ThirdParty] does not name.
	RuleThirdParty = "third-party"
	// RuleUnusedAllowance: an entry of [Policy.ThirdParty] or
	// [Policy.APIExceptions] that no package of the graph uses. An allow
	// list that only grows stops telling a reader what is depended on.
	RuleUnusedAllowance = "unused-allowance"
)

const (
	owner   = "hostkit.dev"
	cmdRoot = owner + "/cmd/"
	libRoot = owner + "/lib"
	apiRoot = libRoot + "/api/"
	wirePkg = libRoot + "/wire"
	rpcPkg  = libRoot + "/rpc"
)

// Package is one package of a module as the rules see it: the package
// and its tests (internal and external) together.
type Package struct {
	Path    string   // import path, e.g. "hostkit.dev/lib/wire"
	Module  string   // path of the module it belongs to, e.g. "hostkit.dev/lib"
	Imports []Import // its direct imports, each path once
}

// Import is one direct import of a [Package].
type Import struct {
	Path   string // import path of the imported package
	Module string // module path of the imported package; empty for the standard library
	Test   bool   // reports whether only the package's _test.go files import it
}

// Policy is what the rules allow beyond the fixed ones.
type Policy struct {
	// ThirdParty maps a module path to the modules outside hostkit.dev its
	// packages and tests may import, each mapped to the reason it may. A
	// module without an entry may import none.
	ThirdParty map[string]map[string]string
	// APIExceptions maps "importer importee" (two import paths and a
	// space) to the reason a lib/api package may import a package beyond
	// the standard library, lib/wire and lib/rpc.
	APIExceptions map[string]string
}

// Violation is one broken rule.
type Violation struct {
	Rule string // one of the Rule constants
	From string // the importing package; for RuleUnusedAllowance, the module or package the entry is for
	To   string // the imported package; for RuleUnusedAllowance, the allowed module or package
}

// String reports v as "rule: from -> to".
func (v Violation) String() string {
	return v.Rule + ": " + v.From + " -> " + v.To
}

// Check applies the import rules and p to the packages of graph and
// returns every violation, sorted and each once. A graph may hold the same
// package more than once (loaded for several GOOS values, say); an
// allowance is used if any copy uses it.
func Check(graph []Package, p Policy) []Violation {
	var out []Violation
	usedMod := map[[2]string]bool{}
	usedAPI := map[string]bool{}
	for _, pkg := range graph {
		for _, imp := range pkg.Imports {
			if x, y := cmdOf(pkg.Path), cmdOf(imp.Path); x != "" && y != "" && x != y {
				out = append(out, Violation{RuleCmdImportsOtherCmd, pkg.Path, imp.Path})
			}
			if within(pkg.Path, libRoot) && cmdOf(imp.Path) != "" {
				out = append(out, Violation{RuleLibImportsCmd, pkg.Path, imp.Path})
			}
			// A test may stand up a real server (lib/sock) or use the
			// assertion library: that reaches no client of the package.
			if strings.HasPrefix(pkg.Path, apiRoot) && !imp.Test && !apiAllowed(imp) {
				key := pkg.Path + " " + imp.Path
				if _, ok := p.APIExceptions[key]; ok {
					usedAPI[key] = true
				} else {
					out = append(out, Violation{RuleAPIImport, pkg.Path, imp.Path})
				}
			}
			if imp.Module != "" && !within(imp.Module, owner) {
				if _, ok := p.ThirdParty[pkg.Module][imp.Module]; ok {
					usedMod[[2]string{pkg.Module, imp.Module}] = true
				} else {
					out = append(out, Violation{RuleThirdParty, pkg.Path, imp.Path})
				}
			}
		}
	}
	for mod, deps := range p.ThirdParty {
		for dep := range deps {
			if !usedMod[[2]string{mod, dep}] {
				out = append(out, Violation{RuleUnusedAllowance, mod, dep})
			}
		}
	}
	for key := range p.APIExceptions {
		if !usedAPI[key] {
			from, to, _ := strings.Cut(key, " ")
			out = append(out, Violation{RuleUnusedAllowance, from, to})
		}
	}
	slices.SortFunc(out, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
	return slices.Compact(out)
}

// apiAllowed reports whether a lib/api package may import imp without an
// exception.
func apiAllowed(imp Import) bool {
	return imp.Module == "" || imp.Path == wirePkg || imp.Path == rpcPkg
}

// cmdOf returns X for a package of hostkit.dev/cmd/X, or "".
func cmdOf(path string) string {
	rest, ok := strings.CutPrefix(path, cmdRoot)
	if !ok {
		return ""
	}
	x, _, _ := strings.Cut(rest, "/")
	return x
}

// within reports whether path is root or below it.
func within(path, root string) bool {
	return path == root || strings.HasPrefix(path, root+"/")
}
