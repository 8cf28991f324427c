package deptest

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	const (
		lib      = "hostkit.dev/lib"
		egressd  = "hostkit.dev/cmd/egressd"
		secretd  = "hostkit.dev/cmd/secretd"
		msgpack  = "github.com/vmihailenco/msgpack/v5"
		sys      = "golang.org/x/sys"
		fooapi   = "hostkit.dev/lib/api/fooapi"
		libSock  = "hostkit.dev/lib/sock"
		libWire  = "hostkit.dev/lib/wire"
		libRPC   = "hostkit.dev/lib/rpc"
		egressIn = egressd + "/internal/proxy"
	)
	std := func(path string) Import { return Import{Path: path} }
	pkg := func(path, module string, imps ...Import) Package {
		return Package{Path: path, Module: module, Imports: imps}
	}
	base := Policy{
		ThirdParty: map[string]map[string]string{
			lib:     {msgpack: "codec"},
			egressd: {sys: "syscalls"},
		},
	}
	// clean is a graph that keeps every rule and uses every allowance.
	clean := []Package{
		pkg(libWire, lib, std("bytes"), Import{Path: msgpack, Module: msgpack}),
		pkg(fooapi, lib, std("context"), Import{Path: libWire, Module: lib}, Import{Path: libRPC, Module: lib},
			Import{Path: libSock, Module: lib, Test: true}),
		pkg(egressIn, egressd, Import{Path: sys + "/unix", Module: sys}, Import{Path: libWire, Module: lib},
			Import{Path: egressd + "/internal/request", Module: egressd}),
	}
	with := func(extra ...Package) []Package { return append(append([]Package(nil), clean...), extra...) }

	tests := []struct {
		name   string
		graph  []Package
		policy Policy
		want   []string // Violation.String of each, sorted
	}{
		{name: "clean", graph: clean, policy: base},
		{
			name:   "daemon imports another daemon's package",
			graph:  with(pkg(egressd, egressd, Import{Path: secretd + "/internal/lease", Module: secretd})),
			policy: base,
			want:   []string{"cmd-imports-other-cmd: hostkit.dev/cmd/egressd -> hostkit.dev/cmd/secretd/internal/lease"},
		},
		{
			name:   "daemon's test imports another daemon's main",
			graph:  with(pkg(egressIn, egressd, Import{Path: secretd, Module: secretd, Test: true})),
			policy: base,
			want:   []string{"cmd-imports-other-cmd: hostkit.dev/cmd/egressd/internal/proxy -> hostkit.dev/cmd/secretd"},
		},
		{
			name:   "daemon imports its own packages",
			graph:  with(pkg(egressd, egressd, Import{Path: egressIn, Module: egressd})),
			policy: base,
		},
		{
			name:   "a cmd name that is a prefix of another",
			graph:  with(pkg("hostkit.dev/cmd/egress/x", "hostkit.dev/cmd/egress", Import{Path: egressIn, Module: egressd})),
			policy: base,
			want:   []string{"cmd-imports-other-cmd: hostkit.dev/cmd/egress/x -> hostkit.dev/cmd/egressd/internal/proxy"},
		},
		{
			name:   "lib imports cmd",
			graph:  with(pkg(libSock, lib, Import{Path: egressIn, Module: egressd})),
			policy: base,
			want:   []string{"lib-imports-cmd: hostkit.dev/lib/sock -> hostkit.dev/cmd/egressd/internal/proxy"},
		},
		{
			name:   "lib's test imports cmd",
			graph:  with(pkg(libSock, lib, Import{Path: egressd, Module: egressd, Test: true})),
			policy: base,
			want:   []string{"lib-imports-cmd: hostkit.dev/lib/sock -> hostkit.dev/cmd/egressd"},
		},
		{
			name:   "a path that only starts like lib",
			graph:  with(pkg("hostkit.dev/library", "hostkit.dev/library", Import{Path: egressd, Module: egressd})),
			policy: base,
		},
		{
			name:   "api imports lib/sock",
			graph:  with(pkg(fooapi, lib, Import{Path: libSock, Module: lib})),
			policy: base,
			want:   []string{"api-import: hostkit.dev/lib/api/fooapi -> hostkit.dev/lib/sock"},
		},
		{
			name:   "api imports another api",
			graph:  with(pkg(fooapi, lib, Import{Path: "hostkit.dev/lib/api/barapi", Module: lib})),
			policy: base,
			want:   []string{"api-import: hostkit.dev/lib/api/fooapi -> hostkit.dev/lib/api/barapi"},
		},
		{
			name:   "api imports an allowed third-party module",
			graph:  with(pkg(fooapi, lib, Import{Path: msgpack, Module: msgpack})),
			policy: base,
			want:   []string{"api-import: hostkit.dev/lib/api/fooapi -> github.com/vmihailenco/msgpack/v5"},
		},
		{
			name:  "api import with an exception",
			graph: with(pkg(fooapi, lib, Import{Path: libSock, Module: lib})),
			policy: Policy{ThirdParty: base.ThirdParty, APIExceptions: map[string]string{
				fooapi + " " + libSock: "reason",
			}},
		},
		{
			name:  "api exception no longer used",
			graph: clean,
			policy: Policy{ThirdParty: base.ThirdParty, APIExceptions: map[string]string{
				fooapi + " " + libSock: "reason",
			}},
			want: []string{"unused-allowance: hostkit.dev/lib/api/fooapi -> hostkit.dev/lib/sock"},
		},
		{
			name:   "third-party module not allowed",
			graph:  with(pkg(libSock, lib, Import{Path: "golang.org/x/sys/unix", Module: sys})),
			policy: base,
			want:   []string{"third-party: hostkit.dev/lib/sock -> golang.org/x/sys/unix"},
		},
		{
			name:   "third-party module in a test only, not allowed",
			graph:  with(pkg(libSock, lib, Import{Path: "github.com/matryer/is", Module: "github.com/matryer/is", Test: true})),
			policy: base,
			want:   []string{"third-party: hostkit.dev/lib/sock -> github.com/matryer/is"},
		},
		{
			name:   "module without an entry",
			graph:  with(pkg("hostkit.dev/bench/rpc", "hostkit.dev/bench/rpc", Import{Path: msgpack, Module: msgpack})),
			policy: base,
			want:   []string{"third-party: hostkit.dev/bench/rpc -> github.com/vmihailenco/msgpack/v5"},
		},
		{
			name:  "allowance no package uses",
			graph: clean,
			policy: Policy{ThirdParty: map[string]map[string]string{
				lib:     {msgpack: "codec", "golang.org/x/term": "terminals"},
				egressd: {sys: "syscalls"},
			}},
			want: []string{"unused-allowance: hostkit.dev/lib -> golang.org/x/term"},
		},
		{
			name:  "allowance for a module the graph lacks",
			graph: clean,
			policy: Policy{ThirdParty: map[string]map[string]string{
				lib:                      {msgpack: "codec"},
				egressd:                  {sys: "syscalls"},
				"hostkit.dev/bench/gone": {sys: "syscalls"},
			}},
			want: []string{"unused-allowance: hostkit.dev/bench/gone -> golang.org/x/sys"},
		},
		{
			name: "one violation however often the graph repeats it",
			graph: with(
				pkg(libSock, lib, Import{Path: egressd, Module: egressd}),
				pkg(libSock, lib, Import{Path: egressd, Module: egressd}),
			),
			policy: base,
			want:   []string{"lib-imports-cmd: hostkit.dev/lib/sock -> hostkit.dev/cmd/egressd"},
		},
		{
			name: "several rules at once",
			graph: with(pkg(fooapi, lib,
				Import{Path: egressIn, Module: egressd},
				Import{Path: "golang.org/x/term", Module: "golang.org/x/term"},
			)),
			policy: base,
			want: []string{
				"api-import: hostkit.dev/lib/api/fooapi -> golang.org/x/term",
				"api-import: hostkit.dev/lib/api/fooapi -> hostkit.dev/cmd/egressd/internal/proxy",
				"lib-imports-cmd: hostkit.dev/lib/api/fooapi -> hostkit.dev/cmd/egressd/internal/proxy",
				"third-party: hostkit.dev/lib/api/fooapi -> golang.org/x/term",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			var got []string
			for _, v := range Check(tt.graph, tt.policy) {
				got = append(got, v.String())
			}
			is.Equal(got, tt.want)
		})
	}
}

// goList is a cut-down `go list -deps -test -json` of a module with one
// package, its internal test, its external test and their test main.
const goList = `
{"ImportPath": "errors", "Standard": true}
{"ImportPath": "testing", "Standard": true}
{"ImportPath": "golang.org/x/sys/unix", "Module": {"Path": "golang.org/x/sys"}}
{"ImportPath": "github.com/matryer/is", "Module": {"Path": "github.com/matryer/is"}}
{"ImportPath": "hostkit.dev/lib/wire", "Module": {"Path": "hostkit.dev/lib"}}
{"ImportPath": "hostkit.dev/x/p", "Module": {"Path": "hostkit.dev/x", "Main": true},
 "Imports": ["C", "errors", "golang.org/x/sys/unix", "hostkit.dev/lib/wire"],
 "TestImports": ["errors", "github.com/matryer/is", "testing"],
 "XTestImports": ["hostkit.dev/x/p", "testing"]}
{"ImportPath": "hostkit.dev/x/p [hostkit.dev/x/p.test]", "ForTest": "hostkit.dev/x/p", "Module": {"Path": "hostkit.dev/x", "Main": true},
 "Imports": ["errors", "github.com/matryer/is", "testing"]}
{"ImportPath": "hostkit.dev/x/p_test [hostkit.dev/x/p.test]", "ForTest": "hostkit.dev/x/p", "Module": {"Path": "hostkit.dev/x", "Main": true},
 "Imports": ["hostkit.dev/x/p [hostkit.dev/x/p.test]", "testing"]}
{"ImportPath": "hostkit.dev/x/p.test", "Module": {"Path": "hostkit.dev/x", "Main": true},
 "Imports": ["hostkit.dev/x/p [hostkit.dev/x/p.test]", "testing"]}
`

func TestParse(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pkgs, err := parse(strings.NewReader(goList))
	is.NoErr(err)
	is.Equal(pkgs, []Package{{
		Path:   "hostkit.dev/x/p",
		Module: "hostkit.dev/x",
		Imports: []Import{
			{Path: "errors"},
			{Path: "golang.org/x/sys/unix", Module: "golang.org/x/sys"},
			{Path: "hostkit.dev/lib/wire", Module: "hostkit.dev/lib"},
			{Path: "github.com/matryer/is", Module: "github.com/matryer/is", Test: true},
			{Path: "testing", Test: true},
			{Path: "hostkit.dev/x/p", Module: "hostkit.dev/x", Test: true},
		},
	}})
}

func TestParseUnlistedImport(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	_, err := parse(strings.NewReader(`{"ImportPath": "hostkit.dev/x/p", "Module": {"Path": "hostkit.dev/x", "Main": true}, "Imports": ["example.com/gone"]}`))
	is.True(err != nil) // an import go list did not list cannot be placed in a module
	is.True(strings.Contains(err.Error(), "example.com/gone"))
}
