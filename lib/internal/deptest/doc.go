// Package deptest enforces hostkit's import rules over the package graph of
// every module in the repository, in the manner of tailscale's deptest:
//
//   - a package of one binary (hostkit.dev/cmd/X/...) never imports a
//     package of another (hostkit.dev/cmd/Y/...);
//   - lib never imports cmd;
//   - a wire-type package (hostkit.dev/lib/api/...) imports only the
//     standard library, lib/wire and lib/rpc, so that any client can take
//     it without pulling in a daemon's dependencies;
//   - each module imports only the third-party modules its allow list names,
//     each with a reason, and the list names nothing the module no longer
//     imports.
//
// [Load] reads a module's graph with `go list`; [Check] applies the rules to
// a graph and is what the tests feed synthetic graphs to. The allow lists
// live in the package's test, each entry with the reason for it; `go test
// work` runs it with the rest of lib.
package deptest
