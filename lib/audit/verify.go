package audit

import (
	"fmt"
	"os"
	"path/filepath"

	"hostkit.dev/lib/wire"
)

// Report summarizes a verified log.
type Report struct {
	// Files is the number of files read (rotated and active).
	Files int
	// Records is the number of records in the chain.
	Records int
	// FirstSeq and LastSeq are the seqs of the first and last records
	// (0 when there are none).
	FirstSeq, LastSeq uint64
	// Torn is the number of torn lines skipped (see Open).
	Torn int
}

// Verify checks the log name in dir: it reads name.N … name.1 and then name,
// oldest to newest, as one stream of lines, and checks that every line is a
// valid record, that seq grows by exactly 1 and that each prev is the
// SHA-256 of the line before. The first record of the oldest file is
// trusted, so deleting the oldest rotated files keeps a log valid. A torn
// line is accepted when it is the very last line (no newline) or when the
// next record chains past it and carries `fields.torn_tail: true`.
//
// Errors: `audit.chain_broken` (edited, deleted or reordered records, a
// missing file) and `audit.corrupt` (a line that is not a record), each
// naming the file and 1-based line; `audit.io` when files cannot be read.
// An empty or missing log yields a zero Report and no error.
func Verify(dir, name string) (Report, error) {
	files, err := listFiles(dir, name)
	if os.IsNotExist(err) {
		return Report{}, nil
	}
	if err != nil {
		return Report{}, wire.Wrap(CodeIO, "cannot list the audit directory", err)
	}
	var v verifier
	for _, lf := range files {
		f, err := os.Open(lf.path)
		if err != nil {
			return v.rep, wire.Wrap(CodeIO, "cannot open "+filepath.Base(lf.path), err)
		}
		v.rep.Files++
		base := filepath.Base(lf.path)
		err = eachLine(f, func(n int, line []byte, nl bool) error { return v.line(base, n, line, nl) })
		f.Close()
		if err != nil {
			return v.rep, err
		}
	}
	return v.rep, v.finish()
}

// link is the chain state after a record.
type link struct {
	seq  uint64
	hash string
}

// verifier checks a stream of lines.
type verifier struct {
	rep       Report
	started   bool
	cur, prev link // after the last record, and after the one before it
	hasPrev   bool
	pending   error // a line that failed, unless the next one excuses it
	tornOK    bool  // pending is an unparsable last line without newline
}

// follows reports whether r chains from l.
func follows(r Record, l link) bool { return r.Seq == l.seq+1 && r.Prev == l.hash }

// isTornNote reports whether r notes a torn line before it.
func isTornNote(r Record) bool { return r.Fields["torn_tail"] == true }

// line checks one line.
func (v *verifier) line(file string, n int, line []byte, nl bool) error {
	r, perr := parseLine(line)
	if v.pending != nil {
		if perr == nil && isTornNote(r) && (!v.started || follows(r, v.cur)) {
			v.pending = nil
			v.rep.Torn++
			v.accept(r, line)
			return nil
		}
		return v.pending
	}
	switch {
	case perr != nil:
		v.pending, v.tornOK = wire.Wrap(CodeCorrupt, fmt.Sprintf("%s line %d: not a valid record", file, n), perr), !nl
	case !v.started || follows(r, v.cur):
		v.accept(r, line)
	case isTornNote(r) && v.hasPrev && follows(r, v.prev):
		// The record before was a torn line that happened to parse.
		v.cur, v.hasPrev = v.prev, false
		v.rep.Records--
		v.rep.Torn++
		v.accept(r, line)
	case r.Seq != v.cur.seq+1:
		v.pending, v.tornOK = wire.Errorf(CodeChainBroken, "%s line %d: seq %d follows seq %d", file, n, r.Seq, v.cur.seq), false
	default:
		v.pending, v.tornOK = wire.Errorf(CodeChainBroken, "%s line %d: prev does not match the record before", file, n), false
	}
	return nil
}

// accept adds r, whose line is line, to the chain.
func (v *verifier) accept(r Record, line []byte) {
	if !v.started || v.rep.Records == 0 {
		v.rep.FirstSeq = r.Seq
	}
	v.prev, v.hasPrev = v.cur, v.started
	v.cur = link{seq: r.Seq, hash: hashLine(line)}
	v.started = true
	v.rep.Records++
	v.rep.LastSeq = r.Seq
}

// finish ends the stream: a failed last line is fine only if it is torn
// (unparsable and without a newline).
func (v *verifier) finish() error {
	if v.pending == nil {
		return nil
	}
	if v.tornOK {
		v.rep.Torn++
		return nil
	}
	return v.pending
}
