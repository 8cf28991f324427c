// Package credsrc imports credentials that systemd passes to secretd
// (LoadCredential=, LoadCredentialEncrypted=, SetCredential=): systemd
// places each credential as a read-only regular file named by its id in
// the directory named by $CREDENTIALS_DIRECTORY (at-rest encryption is
// systemd's job). One more credential, MetaFile, names the destinations and
// targets of each one; a credential file that it does not name is ignored.
//
// MetaFile is JSON:
//
//	{"version": 1, "credentials": [{"name": "github", "file": "github-token",
//	  "destinations": ["https://api.github.com"],
//	  "targets": [{"target": "header:Authorization", "template": "Bearer {}"}],
//	  "strip_newline": true}]}
//
// "file" defaults to "name"; "strip_newline" drops one trailing "\n" or
// "\r\n" from the value. Imported credentials are read-only over the socket
// (credential.read_only) and have Source "systemd".
package credsrc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"hostkit.dev/cmd/secretd/internal/credential"
	"hostkit.dev/cmd/secretd/internal/secmem"
	"hostkit.dev/lib/api/secretdapi"
)

// MetaFile is the name of the metadata credential.
const MetaFile = "hostkit-credentials.json"

// maxMetaLen bounds the metadata file, in bytes.
const maxMetaLen = 1 << 20

// Meta is MetaFile's content.
type Meta struct {
	Version     int     `json:"version"`     // 1
	Credentials []Entry `json:"credentials"` // the credentials to import; other files are ignored and logged
}

// Entry describes one imported credential.
type Entry struct {
	Name         string                  `json:"name"`                    // the credential's name, [a-z0-9][a-z0-9._-]{0,63}
	File         string                  `json:"file,omitempty"`          // the credential file's id in $CREDENTIALS_DIRECTORY; absent = Name
	Destinations []string                `json:"destinations"`            // allowed origins, as credential.put's
	Targets      []credential.JSONTarget `json:"targets"`                 // allowed targets, as credential.put's
	StripNewline bool                    `json:"strip_newline,omitempty"` // drop one trailing "\n" or "\r\n" from the value
}

// Result is what Load found.
type Result struct {
	Credentials []credential.Credential // the imported credentials, source "systemd"
	Unused      []string                // credential files MetaFile does not name, sorted
}

// Load imports the credentials of dir. An empty dir means no systemd
// credentials: nothing is imported. A missing MetaFile imports nothing and
// reports every file as unused. Any error in MetaFile or in a file it names
// (unreadable, a symlink, not a regular file, empty or over 64 KiB, bad
// destinations or targets, a duplicate name) fails the whole import, so a
// misconfiguration stops secretd at start instead of hiding a credential.
// Errors name files and fields, never values.
func Load(dir string, alloc *secmem.Allocator) (*Result, error) {
	res := &Result{}
	if dir == "" {
		return res, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("credsrc.Load: %w", err)
	}
	metaRaw, err := readRegular(filepath.Join(dir, MetaFile), maxMetaLen)
	if errors.Is(err, os.ErrNotExist) {
		for _, e := range ents {
			res.Unused = append(res.Unused, e.Name())
		}
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("credsrc.Load: %s: %w", MetaFile, err)
	}
	var meta Meta
	dec := json.NewDecoder(bytes.NewReader(metaRaw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&meta); err != nil {
		return nil, fmt.Errorf("credsrc.Load: %s: %w", MetaFile, err)
	}
	if meta.Version != 1 {
		return nil, fmt.Errorf("credsrc.Load: %s: version %d is not supported (want 1)", MetaFile, meta.Version)
	}
	used := map[string]bool{MetaFile: true}
	ok := false
	defer func() {
		if !ok {
			for _, c := range res.Credentials {
				c.Value.Free()
			}
		}
	}()
	for i, e := range meta.Credentials {
		c, err := load(dir, e, alloc)
		if err != nil {
			return nil, fmt.Errorf("credsrc.Load: %s: credentials[%d] (%q): %w", MetaFile, i, e.Name, err)
		}
		if slices.ContainsFunc(res.Credentials, func(o credential.Credential) bool { return o.Meta.Name == e.Name }) {
			c.Value.Free()
			return nil, fmt.Errorf("credsrc.Load: %s: credentials[%d]: name %q is listed twice", MetaFile, i, e.Name)
		}
		used[fileOf(e)] = true
		res.Credentials = append(res.Credentials, c)
	}
	for _, e := range ents {
		if !used[e.Name()] {
			res.Unused = append(res.Unused, e.Name())
		}
	}
	ok = true
	return res, nil
}

func fileOf(e Entry) string {
	if e.File != "" {
		return e.File
	}
	return e.Name
}

func load(dir string, e Entry, alloc *secmem.Allocator) (credential.Credential, error) {
	if !credential.ValidName(e.Name) {
		return credential.Credential{}, errors.New("name must match [a-z0-9][a-z0-9._-]{0,63}")
	}
	file := fileOf(e)
	if file == MetaFile || strings.ContainsAny(file, "/\x00") || file == "." || file == ".." {
		return credential.Credential{}, fmt.Errorf("file %q is not a credential file name", file)
	}
	dests, err := credential.CanonicalDestinations(e.Destinations)
	if err != nil {
		return credential.Credential{}, err
	}
	targets, err := credential.CheckTargets(credential.FromJSONTargets(e.Targets))
	if err != nil {
		return credential.Credential{}, err
	}
	path := filepath.Join(dir, file)
	raw, err := readRegular(path, secretdapi.MaxValueLen+2)
	if err != nil {
		return credential.Credential{}, fmt.Errorf("file %q: %w", file, err)
	}
	defer secmem.Zero(raw)
	value := raw
	if e.StripNewline {
		value = bytes.TrimSuffix(value, []byte("\n"))
		value = bytes.TrimSuffix(value, []byte("\r"))
	}
	if err := credential.CheckValue(value); err != nil {
		return credential.Credential{}, fmt.Errorf("file %q: %w", file, err)
	}
	if err := credential.CheckBasicValue(targets, value); err != nil {
		return credential.Credential{}, fmt.Errorf("file %q: %w", file, err)
	}
	var mtime int64
	if fi, err := os.Stat(path); err == nil {
		mtime = fi.ModTime().UnixMilli()
	}
	buf, err := alloc.Copy(value)
	if err != nil {
		return credential.Credential{}, err
	}
	return credential.Credential{Value: buf, Meta: secretdapi.CredentialMeta{CreatedAt: mtime, Destinations: dests,
		Name: e.Name, Source: credential.SourceSystemd, Targets: targets, UpdatedAt: mtime, Version: 1}}, nil
}

// readRegular reads a regular file (not a symlink) of at most max bytes.
func readRegular(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	buf := make([]byte, fi.Size())
	if n, err := f.ReadAt(buf, 0); n != len(buf) {
		secmem.Zero(buf)
		return nil, fmt.Errorf("short read: %w", err)
	}
	return buf, nil
}
