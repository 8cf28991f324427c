package audit

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"hostkit.dev/lib/wire"
)

// followPoll is how often Follow looks for new records.
const followPoll = 200 * time.Millisecond

// Follow calls fn, in seq order, for every record of the log name in dir
// whose seq is at least from (0 means all), first those already written
// (in rotated files too) and then new ones as they are appended, polling
// every 200ms and following rotation. It returns fn's first error, or
// ctx.Err() once ctx is done. Like ReadTail it skips lines that do not
// parse and does not verify the chain; records with a seq at or below one
// already passed to fn are skipped.
func Follow(ctx context.Context, dir, name string, from uint64, fn func(Record) error) error {
	fl := &follower{dir: dir, name: name, fn: fn}
	if from > 0 {
		fl.last = from - 1
	}
	defer fl.closeCur()
	t := time.NewTicker(followPoll)
	defer t.Stop()
	for {
		if err := fl.poll(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// follower is Follow's state.
type follower struct {
	dir, name string
	fn        func(Record) error
	last      uint64   // highest seq passed to fn
	cur       *os.File // the active file as last opened
	partial   []byte   // an incomplete last line of cur
}

// poll reads what is new, switching files after a rotation.
func (fl *follower) poll() error {
	if fl.cur == nil {
		f, err := os.Open(filepath.Join(fl.dir, fl.name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil // not created yet
		}
		if err != nil {
			return wire.Wrap(CodeIO, "cannot open the audit log", err)
		}
		fl.cur = f
		if err := fl.catchUp(); err != nil {
			return err
		}
	}
	if err := fl.drain(); err != nil {
		return err
	}
	cst, err1 := fl.cur.Stat()
	pst, err2 := os.Stat(filepath.Join(fl.dir, fl.name))
	if err1 == nil && err2 == nil && os.SameFile(cst, pst) {
		return nil
	}
	if err := fl.drain(); err != nil { // rotated: finish the old file
		return err
	}
	fl.closeCur()
	return nil
}

// catchUp emits records newer than fl.last from rotated files, oldest
// first. A rotation while it runs shows as a file that moved or a gap in
// seq; it then stops (having emitted only records in order) and tries
// again. A gap is accepted only when two passes in a row saw the same
// files: then no rotation is under way and the records are really missing
// (a line that does not parse), not still being moved.
func (fl *follower) catchUp() error {
	var prev []logFile
	for try := 0; ; try++ {
		files, err := listFiles(fl.dir, fl.name)
		if err != nil {
			return wire.Wrap(CodeIO, "cannot list the audit directory", err)
		}
		done, err := fl.catchUpOnce(files, try > 0 && sameFiles(prev, files))
		if err != nil || done {
			return err
		}
		prev = files
		time.Sleep(20 * time.Millisecond)
	}
}

// sameFiles reports whether two listings name the same files, each
// still the same inode (the active file may have grown: appends never
// open a gap).
func sameFiles(a, b []logFile) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].path != b[i].path || !os.SameFile(a[i].info, b[i].info) {
			return false
		}
	}
	return true
}

// catchUpOnce makes one pass over files; done is false when it must be
// retried.
func (fl *follower) catchUpOnce(files []logFile, acceptGaps bool) (done bool, err error) {
	start := 0 // the newest rotated file whose first seq is not past fl.last+1
	for i := len(files) - 1; i >= 0; i-- {
		if files[i].n == 0 {
			continue
		}
		start = i
		if first, ok := firstSeq(files[i].path); ok && first <= fl.last+1 {
			break
		}
	}
	for i := start; i < len(files) && files[i].n > 0; i++ {
		gapOK := acceptGaps || i == 0 // older history may have been deleted
		if ok, err := fl.emitFile(files[i], gapOK); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// emitFile emits the new records of lf; ok is false if lf moved since it
// was listed or a gap appeared (unless gapOK for its first new record).
func (fl *follower) emitFile(lf logFile, gapOK bool) (ok bool, err error) {
	f, err := os.Open(lf.path)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !os.SameFile(st, lf.info) {
		return false, nil
	}
	if last, err := lastLines(f, 1); err == nil && len(last) == 1 {
		if r, err := parseLine(last[0]); err == nil && r.Seq <= fl.last {
			return true, nil // nothing new here
		}
	}
	ok = true
	err = eachLine(f, func(_ int, line []byte, _ bool) error {
		r, err := parseLine(line)
		if err != nil || r.Seq <= fl.last {
			return nil
		}
		if r.Seq != fl.last+1 && !gapOK {
			ok = false
			return errStop
		}
		gapOK = false
		return fl.emit(line)
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return ok, err
}

// errStop ends eachLine early.
var errStop = errors.New("stop")

// firstSeq returns the seq of the first record in path.
func firstSeq(path string) (uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	line, _, err := newLineReader(f).next()
	if err != nil {
		return 0, false
	}
	r, err := parseLine(line)
	return r.Seq, err == nil
}

// drain emits every complete line appended to cur since the last read.
func (fl *follower) drain() error {
	buf, err := io.ReadAll(fl.cur)
	if err != nil {
		return wire.Wrap(CodeIO, "cannot read the audit log", err)
	}
	data := append(fl.partial, buf...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		if err := fl.emit(data[:i]); err != nil {
			return err
		}
		data = data[i+1:]
	}
	fl.partial = append([]byte(nil), data...)
	return nil
}

// emit passes the record on line to fn if it is new.
func (fl *follower) emit(line []byte) error {
	r, err := parseLine(line)
	if err != nil || r.Seq <= fl.last {
		return nil
	}
	fl.last = r.Seq
	return fl.fn(r)
}

// closeCur closes the current file and forgets its partial line.
func (fl *follower) closeCur() {
	if fl.cur != nil {
		fl.cur.Close()
	}
	fl.cur, fl.partial = nil, nil
}
