package audit

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// FsyncPolicy says when Append forces records to stable storage.
type FsyncPolicy int

// Fsync policies.
const (
	// FsyncAlways syncs the file after every record (and the directory
	// after every rotation). It is the default.
	FsyncAlways FsyncPolicy = iota
	// FsyncNever leaves flushing to the operating system.
	FsyncNever
)

// Defaults for Options.
const (
	DefaultName     = "audit.jsonl"
	DefaultMaxBytes = 64 << 20 // 64 MiB
	DefaultMaxFiles = 10
)

// Options configure a Log.
type Options struct {
	// Dir holds the log; it is created 0700 if missing. Required.
	Dir string
	// Name is the active file's name (default "audit.jsonl"); rotated
	// files are Name.1 (newest) to Name.MaxFiles (oldest).
	Name string
	// Daemon is written into every record.
	Daemon string
	// MaxBytes rotates the active file before a record would make it
	// exceed this many bytes (0 means 64 MiB). A record larger than
	// MaxBytes goes alone into a fresh file.
	MaxBytes int64
	// MaxFiles is how many rotated files are kept (0 means 10); older ones
	// are deleted. That breaks nothing: Verify trusts the first prev of
	// the oldest file present.
	MaxFiles int
	// Fsync is the sync policy (default FsyncAlways).
	Fsync FsyncPolicy
	// Scrubber, if set, removes registered secret values from every
	// string of a record, after redact.String.
	Scrubber *redact.Scrubber
	// Now returns the current time (default time.Now).
	Now func() time.Time
}

// Log appends hash-chained records to the active file. It is safe for
// concurrent use; only one Log (one process) may write a directory's log
// at a time.
type Log struct {
	opts Options

	mu     sync.Mutex
	f      *os.File
	size   int64  // bytes in the active file
	seq    uint64 // last written seq
	prev   string // hash of the last written line
	torn   bool   // the next record notes a torn tail
	failed error  // sticky write failure
	closed bool

	line  []byte           // the last line's buffer, reused under mu
	tails sync.Pool        // *[]byte buffers for appendTail
	keys  *redact.KeyCache // field keys found clean (appendTail); nil: none kept

	// Group commit (FsyncAlways): written counts lines written; synced
	// (guarded by syncMu) counts lines known durable; files counts active
	// files synced and closed by rotation or Close, so a Sync that finds its
	// file closed knows the closer synced it first.
	written uint64
	files   uint64
	syncMu  sync.Mutex
	synced  uint64
}

// Open opens (or creates) the log in opts.Dir and continues its chain:
// the next record's seq and prev follow the last complete line of the
// active file, or of Name.1 when the active file is empty or missing.
//
// History is never rewritten. If the file ends in a torn line (no final
// newline, as a crash mid-write leaves), Open appends a newline, chains
// from the last complete record, and the next record carries
// `fields.torn_tail: true`; Verify skips exactly such a line. A last
// complete line that does not parse is `audit.corrupt`; bad options are
// `audit.invalid`; file system errors are `audit.io`.
func Open(opts Options) (*Log, error) {
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	switch {
	case opts.Dir == "":
		return nil, wire.Errorf(CodeInvalid, "audit directory not set")
	case strings.ContainsRune(opts.Name, filepath.Separator) || opts.Name == "." || opts.Name == "..":
		return nil, wire.Errorf(CodeInvalid, "audit file name %q is not a plain name", opts.Name)
	case opts.MaxBytes < 0 || opts.MaxFiles < 0:
		return nil, wire.Errorf(CodeInvalid, "negative rotation limits")
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxFiles == 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, wire.Wrap(CodeIO, "cannot create the audit directory", err)
	}
	l := &Log{opts: opts, prev: ZeroPrev, keys: redact.NewKeyCache(opts.Scrubber)}
	l.tails.New = func() any { b := make([]byte, 0, 512); return &b }
	if err := l.resume(); err != nil {
		return nil, err
	}
	if err := l.openActive(); err != nil {
		return nil, err
	}
	return l, nil
}

// resume loads seq and prev from the newest complete record.
func (l *Log) resume() error {
	for _, path := range []string{l.activePath(), rotatedPath(l.opts.Dir, l.opts.Name, 1)} {
		line, found, err := l.lastRecordLine(path)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		r, err := parseLine(line)
		if err != nil {
			return wire.Wrap(CodeCorrupt, filepath.Base(path)+": last record does not parse", err)
		}
		l.seq, l.prev = r.Seq, hashLine(line)
		return nil
	}
	return nil
}

// lastRecordLine returns the last complete line of path, first ending a
// torn tail with a newline (and noting it). found is false for a missing
// or empty file, or one with only a torn line.
func (l *Log) lastRecordLine(path string) (line []byte, found bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, wire.Wrap(CodeIO, "cannot open the audit log", err)
	}
	defer f.Close()
	lines, err := lastLines(f, 1)
	if err != nil {
		return nil, false, wire.Wrap(CodeIO, "cannot read the audit log", err)
	}
	if _, torn, err := completeEnd(f); err != nil || torn {
		if err == nil {
			_, err = f.Write([]byte{'\n'})
		}
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			return nil, false, wire.Wrap(CodeIO, "cannot end a torn audit line", err)
		}
		l.torn = true
	}
	if len(lines) == 0 {
		return nil, false, nil
	}
	return lines[0], true, nil
}

// activePath returns the active file's path.
func (l *Log) activePath() string { return filepath.Join(l.opts.Dir, l.opts.Name) }

// openActive opens the active file for appending, creating it 0600.
func (l *Log) openActive() error {
	f, err := os.OpenFile(l.activePath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return wire.Wrap(CodeIO, "cannot open the audit log", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return wire.Wrap(CodeIO, "cannot stat the audit log", err)
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Append writes r as the next record and returns its seq. It fills Seq,
// Time, Daemon and Prev (values given there are ignored) and first passes
// Op, Code, Corr and every string in Fields (keys included) through
// redact.String and the Scrubber, as every string in Attrs. Append does
// not keep r's Fields or Attrs: the caller may reuse them once it
// returns. Errors: ctx.Err() if ctx is done, `audit.invalid` (empty Op,
// unknown Outcome or Phase, Fields that do not encode as JSON),
// `audit.closed`, `audit.io`.
func (l *Log) Append(ctx context.Context, r Record) (uint64, error) {
	return l.appendSync(ctx, r, 0)
}

// AppendLazy is Append without the wait for stable storage: the record is
// written (a crash of this process loses nothing) and becomes durable with
// the next record Append or End syncs, at Sync, or at Close. Use it only for
// records whose loss in a power failure changes nothing that was promised:
// a read that succeeded, whose answer changed no state. Under FsyncNever
// it is Append. Errors: those of Append, except `audit.io` from a sync.
func (l *Log) AppendLazy(ctx context.Context, r Record) (uint64, error) {
	seq, _, err := l.append(ctx, r, 0)
	return seq, err
}

// Sync makes every record written so far durable, sharing the fsync with
// concurrent appenders (group commit). Under FsyncNever it does nothing.
// Errors: `audit.io`.
func (l *Log) Sync() error {
	if l.opts.Fsync != FsyncAlways {
		return nil
	}
	l.mu.Lock()
	gen := l.written
	l.mu.Unlock()
	if err := l.syncTo(gen); err != nil {
		return wire.Wrap(CodeIO, "cannot sync the audit log", err)
	}
	return nil
}

// appendSync is Append, with the field before_seq added when beforeSeq > 0
// (Pair.End).
func (l *Log) appendSync(ctx context.Context, r Record, beforeSeq uint64) (uint64, error) {
	seq, gen, err := l.append(ctx, r, beforeSeq)
	if err != nil || l.opts.Fsync != FsyncAlways {
		return seq, err
	}
	if err := l.syncTo(gen); err != nil {
		return 0, wire.Wrap(CodeIO, "cannot sync the audit log", err)
	}
	return seq, nil
}

// syncTo returns once line number gen is durable. Concurrent appenders
// share one fsync (group commit): whoever holds syncMu syncs every line
// written so far, and the others find their line already covered.
func (l *Log) syncTo(gen uint64) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	target, f, files, failed := l.written, l.f, l.files, l.failed
	l.mu.Unlock()
	// A failed log says so even when the lines asked about were synced
	// before it failed: a caller that wrote since (and failed) must learn.
	if failed != nil {
		return failed
	}
	if l.synced >= gen {
		return nil
	}
	err := f.Sync()
	if err != nil && errors.Is(err, os.ErrClosed) {
		l.mu.Lock()
		if l.files != files { // rotation or Close synced it before closing
			err = nil
		}
		l.mu.Unlock()
	}
	if err != nil {
		l.mu.Lock()
		l.failed = err
		l.mu.Unlock()
		return err
	}
	l.synced = target
	return nil
}

// append writes r under the lock and returns its seq and line number.
// Records whose fields are all flat (appendTail) are scrubbed and encoded
// before the lock, straight from the caller's map; the lock then covers
// only the seq, time and prev, the final check for registered values, the
// write and the hash. Other records take the general path (scrubRecord,
// marshalLine), which gives the same bytes.
func (l *Log) append(ctx context.Context, r Record, beforeSeq uint64) (uint64, uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	if r.Op == "" || !validOutcome(r.Outcome) || !validPhase(r.Phase) {
		return 0, 0, wire.Errorf(CodeInvalid, "record needs an op, a known outcome and a known phase")
	}
	r.Op, r.Code, r.Corr = l.constText(r.Op), l.constText(r.Code), l.text(r.Corr)
	bp := l.tails.Get().(*[]byte)
	defer l.tails.Put(bp)
	tail, fast := l.appendTail((*bp)[:0], &r, beforeSeq)
	if cap(tail) <= maxPooledLine {
		*bp = tail
	}
	if !fast {
		var err error
		if r, err = l.scrubFields(mergedFields(r, beforeSeq)); err != nil {
			return 0, 0, err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return 0, 0, wire.Errorf(CodeClosed, "audit log closed")
	case l.failed != nil:
		return 0, 0, wire.Wrap(CodeIO, "audit log failed earlier; reopen it", l.failed)
	}
	r.Seq, r.Time, r.Daemon, r.Prev = l.seq+1, l.opts.Now().UTC(), l.opts.Daemon, l.prev
	line, ok := []byte(nil), false
	if fast && !l.torn {
		if line, ok = appendHead(l.line[:0], r.Seq, r.Time); ok {
			line = appendPrev(append(line, tail...), r.Prev)
			if l.opts.Scrubber.Contains(line) {
				ok = false // encode writes the scrub_failed form
			}
		}
	}
	if !ok {
		if fast { // the flat fields, scrubbed into a map for the general encoder
			var err error
			if r, err = l.scrubFields(mergedFields(r, beforeSeq)); err != nil {
				return 0, 0, err
			}
		}
		if l.torn {
			if r.Fields == nil {
				r.Fields = map[string]any{}
			}
			r.Fields["torn_tail"] = true
		}
		var err error
		if line, err = l.encode(r); err != nil {
			return 0, 0, err
		}
	}
	if l.size > 0 && l.size+int64(len(line))+1 > l.opts.MaxBytes {
		if err := l.rotate(); err != nil {
			l.failed = err
			return 0, 0, wire.Wrap(CodeIO, "cannot rotate the audit log", err)
		}
	}
	if err := l.write(line); err != nil {
		l.failed = err
		return 0, 0, wire.Wrap(CodeIO, "cannot write the audit log", err)
	}
	if ok && cap(line) <= maxPooledLine {
		l.line = line // reused for the next line: nothing keeps it
	}
	l.seq, l.prev, l.torn = r.Seq, hashLine(line), false
	l.written++
	return r.Seq, l.written, nil
}

// encode returns r's line without a newline. Should a registered value
// still appear (it would have to span JSON syntax), the record is written
// with Op, Code, Corr and Fields replaced.
func (l *Log) encode(r Record) ([]byte, error) {
	line, err := marshalLine(r)
	if err != nil || !l.opts.Scrubber.Contains(line) {
		return line, err
	}
	r.Op, r.Code, r.Corr = redact.Redacted, "", ""
	r.Fields = map[string]any{"scrub_failed": true}
	return marshalLine(r)
}

// write appends line and a newline in one write and syncs per policy.
func (l *Log) write(line []byte) error {
	n, err := l.f.Write(append(line, '\n')) // line's spare capacity usually holds the newline; nothing reads past len(line)
	l.size += int64(n)
	return err // FsyncAlways syncs in Append, outside the lock (syncTo)
}

// Close closes the log; later Appends return `audit.closed`. Close is
// idempotent.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.opts.Fsync == FsyncAlways {
		if err := l.f.Sync(); err != nil {
			return wire.Wrap(CodeIO, "cannot sync the audit log", err)
		}
	}
	l.files++
	if err := l.f.Close(); err != nil {
		return wire.Wrap(CodeIO, "cannot close the audit log", err)
	}
	return nil
}
