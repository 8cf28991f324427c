package state

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// File names in the state directory.
const (
	FileName  = "state.json"
	lockName  = "state.lock"
	tmpPrefix = ".state.json.tmp-"
)

// Options configure a Store; zero fields take their defaults.
type Options struct {
	// Now is the clock for expiry and record times; nil means time.Now.
	Now func() time.Time
	// IdemTTL is how long an idempotency record lives (default 24 h).
	IdemTTL time.Duration
	// PlanGrace is how long an expired plan is still reported as
	// CodePlanExpired before it is forgotten (default 1 h).
	PlanGrace time.Duration
	// MaxIdem, MaxPlans and MaxContainers cap the records (defaults
	// 4096, 1024, 4096); MaxFileBytes caps state.json (default 32 MiB).
	MaxIdem, MaxPlans, MaxContainers int
	MaxFileBytes                     int64 // bytes
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.IdemTTL <= 0 {
		o.IdemTTL = 24 * time.Hour
	}
	if o.PlanGrace <= 0 {
		o.PlanGrace = time.Hour
	}
	if o.MaxIdem <= 0 {
		o.MaxIdem = 4096
	}
	if o.MaxPlans <= 0 {
		o.MaxPlans = 1024
	}
	if o.MaxContainers <= 0 {
		o.MaxContainers = 4096
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = 32 << 20
	}
	return o
}

// Store is the open state of one helper. Methods are safe for concurrent
// use; each mutation is durable before it returns (package doc).
type Store struct {
	dir  string
	opt  Options
	lock *os.File

	mu         sync.Mutex
	d          *doc
	plans      map[string]planJSON // in memory only (package doc, "Plans")
	good       []byte              // the last durable encoding of d
	wal        *walFile            // the write-ahead slots, nil until the first write after a snapshot
	recovering map[string]bool     // container ids in progress at Open
	broken     error               // a failed write: mutations refused
	closed     bool
}

// Open loads the state in dir, or initialises it (with a new project UUID)
// when dir holds no state.json. dir is created 0700 when missing and must
// be owned by this user with no group/other access. Leftover temporary
// files of a torn write are removed. Errors: CodeDirUnsafe, CodeLocked,
// CodeCorrupt, CodeSchemaUnsupported, CodeIO.
func Open(dir string, opt Options) (*Store, error) {
	s, err := openStore(dir, opt.withDefaults())
	return s, withRetry(err)
}

// openStore is Open without the retry hints.
func openStore(dir string, opt Options) (*Store, error) {
	dir = filepath.Clean(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, wire.Wrap(CodeIO, "cannot create the state directory", err)
	}
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, opt: opt, lock: lock, recovering: map[string]bool{}, plans: map[string]planJSON{}}
	if err := s.load(); err != nil {
		lock.Close()
		return nil, err
	}
	return s, nil
}

// checkDir refuses a state directory that others could read or swap.
func checkDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return wire.Wrap(CodeIO, "cannot stat the state directory", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return wire.Errorf(CodeDirUnsafe, "the state directory is a symlink or not a directory")
	case !ok || int(st.Uid) != os.Geteuid():
		return wire.Errorf(CodeDirUnsafe, "the state directory is owned by another user")
	case fi.Mode().Perm()&0o077 != 0:
		return wire.Errorf(CodeDirUnsafe, "the state directory is open to group or others (want 0700)")
	}
	return nil
}

// lockDir takes the exclusive flock on dir/state.lock.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, wire.Wrap(CodeDirUnsafe, "cannot open the state lock", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, wire.Wrap(CodeLocked, "another process holds the state lock", err)
		}
		return nil, wire.Wrap(CodeIO, "cannot lock the state directory", err)
	}
	return f, nil
}

// load removes torn temporary files, then reads state.json or writes the
// first one.
func (s *Store) load() error {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return wire.Wrap(CodeIO, "cannot list the state directory", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil {
				return wire.Wrap(CodeIO, "cannot remove a torn temporary state file", err)
			}
		}
	}
	b, err := s.readFile()
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Lstat(filepath.Join(s.dir, walName)); err == nil {
			return wire.Errorf(CodeCorrupt, "state.wal without state.json: refusing to start a new project over it")
		}
		s.d = newDoc(NewUUID(), s.opt.Now().UnixMilli())
		return s.persist(true)
	}
	if err != nil {
		return err
	}
	d, err := decodeDoc(b)
	if err != nil {
		return err
	}
	s.d, s.good = d, b
	// A write-ahead slot newer than state.json holds the last durable
	// document: adopt it, then make it state.json again, so the state at
	// rest is one file and no slot can outlive its snapshot.
	wb, gen, err := walNewest(s.dir, d.Generation)
	if err != nil {
		return err
	}
	if wb != nil {
		wd, err := decodeDoc(wb)
		if err != nil {
			return wire.Wrap(CodeCorrupt, "state.wal holds a document that does not decode", err)
		}
		if wd.Project != d.Project || wd.Generation != gen {
			return wire.Errorf(CodeCorrupt, "state.wal does not continue state.json")
		}
		s.d, s.good = wd, wb
		if err := s.snapshot(wb); err != nil {
			return err
		}
	}
	s.walDrop()
	for id, c := range s.d.Containers {
		if c.Phase.InProgress() {
			s.recovering[id] = true
		}
	}
	return nil
}

// readFile reads state.json without following a symlink, up to the cap.
func (s *Store) readFile() ([]byte, error) {
	f, err := os.OpenFile(filepath.Join(s.dir, FileName), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, wire.Wrap(CodeDirUnsafe, "state.json cannot be opened (a symlink?)", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, wire.Wrap(CodeDirUnsafe, "state.json is not a regular file", err)
	}
	b, err := io.ReadAll(io.LimitReader(f, s.opt.MaxFileBytes+1))
	if err != nil {
		return nil, wire.Wrap(CodeIO, "cannot read state.json", err)
	}
	if int64(len(b)) > s.opt.MaxFileBytes {
		return nil, wire.Errorf(CodeCorrupt, "state.json is larger than %d bytes", s.opt.MaxFileBytes)
	}
	return b, nil
}

// Close releases the lock; later calls fail with CodeClosed. Idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.lock.Close()
}

// Dir returns the state directory.
func (s *Store) Dir() string { return s.dir }

// ProjectID returns the project UUID (stable for the life of the state).
func (s *Store) ProjectID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d.Project
}

// read runs f under the lock for a read-only method.
func (s *Store) read(f func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return wire.Errorf(CodeClosed, "the state store is closed")
	}
	return withRetry(f())
}

// withRetry sets the retry hint docs/protocol.md gives each code.
func withRetry(err error) error {
	var we *wire.Error
	if !errors.As(err, &we) {
		return err
	}
	switch we.Code {
	case CodeFenceStale, CodeIO, CodeRecovering:
		we.Retry = wire.RetryAfterObserve
	case CodeFull:
		we.Retry = wire.RetrySafe
	}
	return err
}

// mutate runs f under the lock, sweeps expired records and persists the
// result; then, only once the write is durable, it runs commit (for
// in-memory bookkeeping outside the document; may be nil). When f fails,
// nothing is written (f must not change the document before it fails).
// When the write fails, the document is rolled back to the last durable
// one, and after an I/O failure the store refuses later mutations.
func (s *Store) mutate(f func(now time.Time) error, commit func()) error {
	return withRetry(s.mutateLocked(f, commit, true))
}

// mutateLocked is mutate without the retry hints; syncDir false leaves
// the rename's durability to the next write (see Batch.DeferDirSync).
func (s *Store) mutateLocked(f func(now time.Time) error, commit func(), syncDir bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return wire.Errorf(CodeClosed, "the state store is closed")
	case s.broken != nil:
		return wire.Wrap(CodeIO, "an earlier state write failed; the helper must reopen its state", s.broken)
	}
	now := s.opt.Now()
	if err := f(now); err != nil {
		return err
	}
	s.sweep(now)
	if err := s.persist(syncDir); err != nil {
		if wire.HasCode(err, CodeIO) {
			s.broken = err
		}
		if d, derr := decodeDoc(s.good); derr == nil {
			s.d = d
		}
		return err
	}
	if commit != nil {
		commit()
	}
	return nil
}

// sweep drops expired idempotency records and plans past their grace.
func (s *Store) sweep(now time.Time) {
	s.sweepPlans(now)
	ms := now.UnixMilli()
	kept := s.d.Idempotency[:0]
	for _, r := range s.d.Idempotency {
		if r.ExpiresMS > ms {
			kept = append(kept, r)
		}
	}
	clear(s.d.Idempotency[len(kept):])
	s.d.Idempotency = kept
}

// sweepPlans drops plans past their grace.
func (s *Store) sweepPlans(now time.Time) {
	grace := s.opt.PlanGrace.Milliseconds()
	for h, p := range s.plans {
		if p.ExpiresMS+grace <= now.UnixMilli() {
			delete(s.plans, h)
		}
	}
}

// persist writes s.d durably as its next generation: into the write-ahead
// slot (one write and one fdatasync), or, when the document outgrew the
// slots or before the first slot exists, as a snapshot (below). syncDir
// false lets a snapshot skip its directory fsync (Batch.DeferDirSync).
// Errors: CodeFull, CodeIO.
func (s *Store) persist(syncDir bool) error {
	prev := s.d.Generation
	s.d.Generation++
	b, err := s.d.encode()
	if err != nil {
		s.d.Generation = prev
		return wire.Wrap(CodeIO, "cannot encode the state", err)
	}
	if int64(len(b)) > s.opt.MaxFileBytes {
		s.d.Generation = prev
		return wire.Errorf(CodeFull, "the state would exceed %d bytes", s.opt.MaxFileBytes)
	}
	if s.good != nil { // a state.json exists: slots may follow it
		err := s.walWrite(b, s.d.Generation)
		if err == nil {
			s.good = b
			return nil
		}
		if !errors.Is(err, errWALFull) {
			s.d.Generation = prev
			return wire.Wrap(CodeIO, "cannot write state.wal", err)
		}
	}
	if err := s.snapshotSync(b, syncDir || s.wal != nil); err != nil {
		s.d.Generation = prev
		return err
	}
	if s.wal != nil {
		s.walDrop() // every slot is older than this snapshot; the next write makes bigger ones
	}
	s.good = b
	return nil
}

// snapshot writes b as state.json durably: temp file 0600 in the
// directory, write, fsync, rename, fsync of the directory.
func (s *Store) snapshot(b []byte) error { return s.snapshotSync(b, true) }

// snapshotSync is snapshot; syncDir false skips the directory fsync (the
// file's content is durable and the rename atomic; whether the old or the
// new document survives a power loss is settled by the next directory
// fsync). Errors: CodeIO.
func (s *Store) snapshotSync(b []byte, syncDir bool) error {
	f, err := os.CreateTemp(s.dir, tmpPrefix+"*")
	if err != nil {
		return wire.Wrap(CodeIO, "cannot create a temporary state file", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.dir, FileName))
	}
	if err != nil {
		os.Remove(tmp)
		return wire.Wrap(CodeIO, "cannot write state.json", err)
	}
	if syncDir {
		if err := fsyncDir(s.dir); err != nil {
			return wire.Wrap(CodeIO, "cannot sync the state directory", err)
		}
	}
	return nil
}

// fsyncDir fsyncs a directory so a rename in it is durable.
func fsyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
