// Package store keeps credentials put over the socket, one file per
// credential in <state>/secretd/credentials/ (directory 0700, files 0600),
// each written atomically: a temporary file in the same directory, fsync,
// rename over the old file, fsync of the directory.
//
// A file is three parts: the magic line "hostkit-credential 1\n", one line
// of JSON metadata (secretdapi.CredentialMeta plus value_len), then exactly
// value_len raw value bytes. The value is written and read as bytes, never
// through a Go string or an encoder's buffer; the read buffer is zeroed.
package store

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"hostkit.dev/cmd/secretd/internal/credential"
	"hostkit.dev/cmd/secretd/internal/secmem"
	"hostkit.dev/lib/api/secretdapi"
)

// Magic is the first line of every credential file.
const Magic = "hostkit-credential 1\n"

// Ext is the file name extension of a credential file: <name>.cred.
const Ext = ".cred"

const tmpPrefix = ".tmp-"

// header is the JSON metadata line.
type header struct {
	Name         string                  `json:"name"`         // the credential's name; the file is <name>.cred
	Version      uint64                  `json:"version"`      // 1 on first put, +1 on each replace
	CreatedAt    int64                   `json:"created_at"`   // Unix ms
	UpdatedAt    int64                   `json:"updated_at"`   // Unix ms
	Destinations []string                `json:"destinations"` // canonical origins, sorted
	Targets      []credential.JSONTarget `json:"targets"`      // sorted by target
	ValueLen     int                     `json:"value_len"`    // bytes of raw value after this line: the rest of the file exactly
}

// Store is a credential directory. Create it with Open.
type Store struct {
	dir string
}

// Open makes dir (and its parent, the daemon's state directory) a private
// 0700 directory owned by this user, or verifies that it is one, and
// removes temporary files older than a minute (left by a crash; a younger
// one may belong to another secretd about to fail its socket lock). A symlink, a foreign owner or a wider
// mode is an error: secretd refuses to start.
func Open(dir string) (*Store, error) {
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := ensurePrivateDir(d); err != nil {
			return nil, err
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("store.Open: %w", err)
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), tmpPrefix) {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return &Store{dir: dir}, nil
}

func ensurePrivateDir(d string) error {
	if err := os.MkdirAll(d, 0o700); err != nil {
		return fmt.Errorf("store.Open: %w", err)
	}
	fi, err := os.Lstat(d)
	if err != nil {
		return fmt.Errorf("store.Open: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("store.Open: %s is not a directory (or is a symlink)", d)
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("store.Open: %s is not owned by this user", d)
	case fi.Mode().Perm() != 0o700:
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("store.Open: %w", err)
		}
	}
	return nil
}

// Dir returns the credential directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) path(name string) string { return filepath.Join(s.dir, name+Ext) }

// Write stores meta and value atomically (Persister). Errors never contain
// the value.
func (s *Store) Write(meta *secretdapi.CredentialMeta, value []byte) error {
	hdr, err := json.Marshal(header{Name: meta.Name, Version: meta.Version, CreatedAt: meta.CreatedAt,
		UpdatedAt: meta.UpdatedAt, Destinations: meta.Destinations, Targets: credential.ToJSONTargets(meta.Targets),
		ValueLen: len(value)})
	if err != nil {
		return fmt.Errorf("store.Write: %w", err)
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("store.Write: %w", err)
	}
	tmp := filepath.Join(s.dir, tmpPrefix+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("store.Write: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	for _, part := range [][]byte{[]byte(Magic), hdr, []byte("\n"), value} {
		if _, err := f.Write(part); err != nil {
			return fmt.Errorf("store.Write: %s: write failed: %w", meta.Name, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("store.Write: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("store.Write: %w", err)
	}
	if err := os.Rename(tmp, s.path(meta.Name)); err != nil {
		return fmt.Errorf("store.Write: %w", err)
	}
	ok = true
	return syncDir(s.dir)
}

// Remove deletes the named credential's file durably (Persister).
func (s *Store) Remove(name string) error {
	if err := os.Remove(s.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store.Remove: %w", err)
	}
	return syncDir(s.dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("store: fsync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("store: fsync dir: %w", err)
	}
	return nil
}

// Load reads every credential file into buffers from alloc. A file that
// is not a valid credential is skipped and reported in bad (by file name,
// with the reason), so one damaged file does not stop the daemon.
func (s *Store) Load(alloc *secmem.Allocator) (creds []credential.Credential, bad []error, err error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("store.Load: %w", err)
	}
	for _, e := range ents {
		name, isCred := strings.CutSuffix(e.Name(), Ext)
		if !isCred || !e.Type().IsRegular() {
			continue
		}
		c, err := s.load(name, alloc)
		if err != nil {
			bad = append(bad, fmt.Errorf("%s: %w", e.Name(), err))
			continue
		}
		creds = append(creds, c)
	}
	return creds, bad, nil
}

func (s *Store) load(name string, alloc *secmem.Allocator) (credential.Credential, error) {
	raw, err := readFile(s.path(name))
	if err != nil {
		return credential.Credential{}, err
	}
	defer secmem.Zero(raw)
	meta, value, err := Decode(raw)
	if err != nil {
		return credential.Credential{}, err
	}
	if meta.Name != name {
		return credential.Credential{}, errors.New("name in file does not match the file name")
	}
	buf, err := alloc.Copy(value)
	if err != nil {
		return credential.Credential{}, err
	}
	meta.Source = credential.SourceStore
	return credential.Credential{Meta: meta, Value: buf}, nil
}

// Decode parses a credential file. value aliases raw. Errors describe the
// structure, never the value.
func Decode(raw []byte) (meta secretdapi.CredentialMeta, value []byte, err error) {
	rest, ok := bytes.CutPrefix(raw, []byte(Magic))
	if !ok {
		return meta, nil, errors.New("not a credential file (bad magic)")
	}
	line, value, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return meta, nil, errors.New("metadata line is not terminated")
	}
	var h header
	if err := json.Unmarshal(line, &h); err != nil {
		return meta, nil, errors.New("metadata is not valid JSON")
	}
	if h.ValueLen != len(value) {
		return meta, nil, fmt.Errorf("value length is %d, metadata says %d", len(value), h.ValueLen)
	}
	if !credential.ValidName(h.Name) || credential.CheckValue(value) != nil {
		return meta, nil, errors.New("invalid name or value length")
	}
	meta = secretdapi.CredentialMeta{CreatedAt: h.CreatedAt, Name: h.Name, UpdatedAt: h.UpdatedAt, Version: h.Version}
	if meta.Destinations, err = credential.CanonicalDestinations(h.Destinations); err != nil {
		return meta, nil, err
	}
	if meta.Targets, err = credential.CheckTargets(credential.FromJSONTargets(h.Targets)); err != nil {
		return meta, nil, err
	}
	if err = credential.CheckBasicValue(meta.Targets, value); err != nil {
		return meta, nil, err
	}
	return meta, value, nil
}

// readFile reads a regular file of at most the largest credential file
// size, refusing symlinks.
func readFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	const maxFile = secretdapi.MaxValueLen + 64<<10
	if !fi.Mode().IsRegular() || fi.Size() > maxFile {
		return nil, errors.New("not a regular file of a credential's size")
	}
	buf := make([]byte, fi.Size())
	n, err := f.ReadAt(buf, 0)
	if n != len(buf) {
		secmem.Zero(buf)
		return nil, fmt.Errorf("short read: %w", err)
	}
	return buf, nil
}
