// Package audit writes and verifies hostkit's append-only audit log: one
// JSON object per line (JSON Lines), each carrying the SHA-256 of the line
// before it, so that an edited, deleted or reordered record breaks the
// chain. The active file is rotated to numbered files (audit.jsonl.1 is the
// newest rotated file) and the chain continues across files and reopens.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"time"

	"hostkit.dev/lib/wire"
)

// Outcome is a record's result.
type Outcome string

// Outcomes.
const (
	OutcomeOK      Outcome = "ok"
	OutcomeDenied  Outcome = "denied"
	OutcomeError   Outcome = "error"
	OutcomeRefused Outcome = "refused"
	OutcomePending Outcome = "pending" // a "before" record of a Pair
)

// Phase places a record in a before/after Pair; single records have none.
type Phase string

// Phases.
const (
	PhaseNone   Phase = ""
	PhaseBefore Phase = "before"
	PhaseAfter  Phase = "after"
)

// ZeroPrev is the prev of the first record of a fresh chain: 64 zeros.
const ZeroPrev = "0000000000000000000000000000000000000000000000000000000000000000"

// Actor identifies the peer on whose behalf a record is written.
type Actor struct {
	UID int `json:"uid"` // the peer's uid from the kernel (SO_PEERCRED, unix(7)); -1 when there is none (a TCP proxy client)
	PID int `json:"pid"` // the peer's pid when it connected; 0 when not known
}

// Record is one audit line. Log.Append fills Seq, Time, Daemon and Prev.
type Record struct {
	// Seq numbers records from 1, without gaps, across rotation and reopen.
	Seq uint64 `json:"seq"`
	// Time is when the record was written, in UTC; it is encoded as an
	// RFC 3339 string with nanoseconds.
	Time time.Time `json:"time"`
	// Daemon is the writing daemon's name (Options.Daemon).
	Daemon string `json:"daemon"`
	// Actor is the peer the operation was done for.
	Actor Actor `json:"actor"`
	// Op is the operation (`area.verb`, e.g. `lease.stage`); required.
	Op string `json:"op"`
	// Phase is "before" or "after" for a Pair, "" for a single record.
	Phase Phase `json:"phase,omitempty"`
	// Outcome is required.
	Outcome Outcome `json:"outcome"`
	// Code is the error code of a failed operation.
	Code string `json:"code,omitempty"`
	// Corr is the request's correlation id.
	Corr string `json:"corr,omitempty"`
	// Fields holds extra data. Values read back by this package decode
	// numbers as json.Number.
	Fields map[string]any `json:"fields,omitempty"`
	// Attrs are more fields, as typed values: a caller that writes records
	// at a high rate builds no map and boxes no value. They are written
	// into "fields" together with Fields (an Attr replaces a field of the
	// same key; a later Attr an earlier one) and read back in Fields.
	// Strings, integers, booleans and slog.Any([]string) are encoded
	// straight (in key order, cheapest when given sorted); any other kind
	// is written as encoding/json writes its Value.Any(). Append reads
	// Attrs during the call only.
	Attrs []slog.Attr `json:"-"`
	// Prev is the lowercase hex SHA-256 of the previous record's line
	// (without its newline), or ZeroPrev for the first record of a chain.
	Prev string `json:"prev"`
}

// validOutcome reports whether o is one of the Outcomes.
func validOutcome(o Outcome) bool {
	switch o {
	case OutcomeOK, OutcomeDenied, OutcomeError, OutcomeRefused, OutcomePending:
		return true
	}
	return false
}

// validPhase reports whether p is one of the Phases.
func validPhase(p Phase) bool {
	return p == PhaseNone || p == PhaseBefore || p == PhaseAfter
}

// hashLine returns the hex SHA-256 of a line without its newline.
func hashLine(line []byte) string {
	sum := sha256.Sum256(line)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:])
}

// isHex64 reports whether s is 64 lowercase hex digits.
func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// parseLine decodes one line (without its newline) into a Record and checks
// its shape: a single JSON object, seq ≥ 1, a UTC time, a known outcome and
// phase, a non-empty op and a 64-hex prev. It returns audit.corrupt
// (without file context) on failure.
func parseLine(line []byte) (Record, error) {
	var r Record
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		return Record{}, wire.Wrap(CodeCorrupt, "not a JSON record", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Record{}, wire.Errorf(CodeCorrupt, "data after the record")
	}
	_, off := r.Time.Zone()
	switch {
	case r.Seq == 0:
		return Record{}, wire.Errorf(CodeCorrupt, "seq missing")
	case r.Time.IsZero() || off != 0:
		return Record{}, wire.Errorf(CodeCorrupt, "time missing or not UTC")
	case r.Op == "":
		return Record{}, wire.Errorf(CodeCorrupt, "op missing")
	case !validOutcome(r.Outcome):
		return Record{}, wire.Errorf(CodeCorrupt, "unknown outcome")
	case !validPhase(r.Phase):
		return Record{}, wire.Errorf(CodeCorrupt, "unknown phase")
	case !isHex64(r.Prev):
		return Record{}, wire.Errorf(CodeCorrupt, "prev is not a SHA-256")
	}
	return r, nil
}
