package audit

// Error codes returned by this package, as the Code of a *wire.Error
// (stable `area.reason` strings, append-only).
const (
	// CodeChainBroken: a record's seq or prev does not follow the record
	// before it (an edit, a deletion, a reorder or a missing file). The
	// message names the file and 1-based line.
	CodeChainBroken = "audit.chain_broken"
	// CodeClosed: the Log was closed.
	CodeClosed = "audit.closed"
	// CodeCorrupt: a line is not a valid record, or the log cannot be
	// continued safely. The message names the file and line.
	CodeCorrupt = "audit.corrupt"
	// CodeInvalid: bad Options or a bad Record (unknown outcome or phase,
	// empty op, fields that do not encode as JSON).
	CodeInvalid = "audit.invalid"
	// CodeIO: reading or writing the log failed; after a failed write the
	// Log refuses further appends until it is reopened.
	CodeIO = "audit.io"
)

// Codes lists every code above, sorted; a test keeps it sorted and unique.
var Codes = []string{
	CodeChainBroken,
	CodeClosed,
	CodeCorrupt,
	CodeInvalid,
	CodeIO,
}
