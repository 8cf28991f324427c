package buildtest

// Error codes returned by this package, as the Code of a *wire.Error
// (stable `area.reason` strings, append-only).
const (
	// CodeBuild: go list or go build failed; the message holds the go
	// command's output (compiler errors, a missing package).
	CodeBuild = "buildtest.build"
	// CodeInvalid: the arguments cannot name one binary (an empty
	// package, an -o flag, a package that is not main).
	CodeInvalid = "buildtest.invalid"
	// CodeIO: the cache directory, a lock file or a binary could not be
	// created, locked, renamed or linked.
	CodeIO = "buildtest.io"
)

// Codes lists every code above, sorted; a test keeps it sorted and unique.
var Codes = []string{
	CodeBuild,
	CodeInvalid,
	CodeIO,
}
