package state

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/bits"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// The write-ahead slots (package doc, "Durability"): state.wal holds two
// slots of walCap bytes each; write g (the document's generation) goes to
// slot g%2, so the slot it overwrites holds g-2 and the other one the
// acknowledged g-1, whatever a crash tears.
const (
	walName   = "state.wal"
	walMagic  = "hkstwal1"
	walHeader = 32 // magic (8), generation (8), length (4), CRC-32C (4), reserved (8)
	walMinCap = 64 << 10
)

// crcTable is CRC-32C (Castagnoli), as ext4 and iSCSI use.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errWALFull is walWrite's cause for a document its slots cannot hold.
var errWALFull = errors.New("the document does not fit the write-ahead slots")

// walFile is the write-ahead file this Store made: its slot size and
// identity (a file that is not this one is never written).
type walFile struct {
	cap      int64
	dev, ino uint64
}

// walWrite writes b (generation gen) to its slot and fdatasyncs it: one
// flush, no rename, no directory sync. It makes the file first when this
// Store has none (sized for b, synced with its directory). errWALFull
// when b does not fit; the caller then writes a snapshot.
func (s *Store) walWrite(b []byte, gen uint64) error {
	need := int64(walHeader + len(b))
	if s.wal == nil {
		if err := s.walCreate(max(walMinCap, int64(1)<<bits.Len64(uint64(2*need)))); err != nil {
			return err
		}
	}
	if need > s.wal.cap {
		return errWALFull
	}
	f, err := os.OpenFile(filepath.Join(s.dir, walName), os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if uint64(st.Dev) != s.wal.dev || uint64(st.Ino) != s.wal.ino {
		return errors.New("state.wal was replaced")
	}
	buf := make([]byte, need)
	copy(buf, walMagic)
	binary.BigEndian.PutUint64(buf[8:], gen)
	binary.BigEndian.PutUint32(buf[16:], uint32(len(b)))
	binary.BigEndian.PutUint32(buf[20:], crc32.Checksum(b, crcTable))
	copy(buf[walHeader:], b)
	if _, err := f.WriteAt(buf, int64(gen%2)*s.wal.cap); err != nil {
		return err
	}
	return fdatasync(f)
}

// walCreate makes state.wal with two slots of cap bytes (allocated, so
// later writes change no size), syncs it and the directory (the file must
// survive for what is written into it to survive), and remembers it.
func (s *Store) walCreate(cap int64) error {
	path := filepath.Join(s.dir, walName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := preallocate(f, 2*cap); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := fsyncDir(s.dir); err != nil {
		return err
	}
	s.wal = &walFile{cap: cap, dev: uint64(st.Dev), ino: uint64(st.Ino)}
	return nil
}

// walDrop removes state.wal after a snapshot made it stale (every slot it
// holds is older than state.json's generation, so even a removal lost to
// a crash is harmless) and forgets it.
func (s *Store) walDrop() {
	s.wal = nil
	_ = os.Remove(filepath.Join(s.dir, walName))
}

// walNewest returns the newest intact slot of state.wal newer than
// generation after, or nil: a slot is intact when its magic, length and
// CRC-32C agree (a torn write fails them). Errors: CodeDirUnsafe (not a
// regular file), CodeIO.
func walNewest(dir string, after uint64) ([]byte, uint64, error) {
	f, err := os.OpenFile(filepath.Join(dir, walName), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, wire.Wrap(CodeDirUnsafe, "state.wal cannot be opened (a symlink?)", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, 0, wire.Wrap(CodeDirUnsafe, "state.wal is not a regular file", err)
	}
	cap := fi.Size() / 2
	var best []byte
	var bestGen uint64
	for slot := int64(0); slot < 2 && cap >= walHeader; slot++ {
		hdr := make([]byte, walHeader)
		if _, err := f.ReadAt(hdr, slot*cap); err != nil {
			return nil, 0, wire.Wrap(CodeIO, "cannot read state.wal", err)
		}
		gen := binary.BigEndian.Uint64(hdr[8:])
		n := int64(binary.BigEndian.Uint32(hdr[16:]))
		if string(hdr[:8]) != walMagic || n > cap-walHeader || gen <= after || gen <= bestGen || int64(gen%2) != slot {
			continue
		}
		b := make([]byte, n)
		if _, err := f.ReadAt(b, slot*cap+walHeader); err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, wire.Wrap(CodeIO, "cannot read state.wal", err)
		}
		if crc32.Checksum(b, crcTable) != binary.BigEndian.Uint32(hdr[20:]) {
			continue // torn
		}
		best, bestGen = b, gen
	}
	return best, bestGen, nil
}
