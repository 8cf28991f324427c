package store

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/cmd/secretd/internal/secmem"
	"hostkit.dev/lib/api/secretdapi"
)

var canary = []byte("CANARY-store-\x00\xff-binary\n")

func meta(name string) *secretdapi.CredentialMeta {
	return &secretdapi.CredentialMeta{CreatedAt: 1, Destinations: []string{"https://api.example.com"}, Name: name,
		Source: "store", Targets: []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}", Overwrite: true}},
		UpdatedAt: 2, Version: 3}
}

func TestWriteLoadRoundTrip(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := filepath.Join(t.TempDir(), "secretd", "credentials")
	s, err := Open(dir)
	is.NoErr(err)
	is.NoErr(s.Write(meta("github"), canary))
	is.NoErr(s.Write(meta("other"), []byte("v")))
	for _, d := range []string{dir, filepath.Dir(dir)} {
		fi, err := os.Stat(d)
		is.NoErr(err)
		is.Equal(fi.Mode().Perm(), os.FileMode(0o700))
	}
	fi, err := os.Stat(filepath.Join(dir, "github.cred"))
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o600))
	ents, _ := os.ReadDir(dir)
	is.Equal(len(ents), 2) // no temporary files left

	alloc := secmem.New(slog.New(slog.DiscardHandler))
	creds, bad, err := s.Load(alloc)
	is.NoErr(err)
	is.Equal(len(bad), 0)
	is.Equal(len(creds), 2)
	for _, c := range creds {
		if c.Meta.Name == "github" {
			is.Equal(c.Value.Bytes(), canary)
			is.Equal(c.Meta.Version, uint64(3))
			is.Equal(c.Meta.Targets, meta("github").Targets)
		}
		c.Value.Free()
	}
	is.NoErr(s.Remove("github"))
	is.NoErr(s.Remove("github")) // missing is fine
	creds, _, _ = s.Load(alloc)
	is.Equal(len(creds), 1)
	creds[0].Value.Free()
}

func TestLoadSkipsDamagedFiles(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := filepath.Join(t.TempDir(), "s", "credentials")
	s, err := Open(dir)
	is.NoErr(err)
	is.NoErr(s.Write(meta("good"), []byte("value")))
	for name, content := range map[string]string{
		"badmagic.cred":  "nope\n{}\nSEKRT",
		"badlen.cred":    Magic + `{"name":"badlen","value_len":99,"destinations":["https://a.example"],"targets":[{"target":"query:k"}]}` + "\nSEKRT",
		"renamed.cred":   Magic + `{"name":"other","value_len":5,"destinations":["https://a.example"],"targets":[{"target":"query:k"}]}` + "\nSEKRT",
		"baddest.cred":   Magic + `{"name":"baddest","value_len":5,"destinations":["http://a.example"],"targets":[{"target":"query:k"}]}` + "\nSEKRT",
		"notacred.txt":   "ignored",
		".tmp-123456789": "recent temp file, kept",
	} {
		is.NoErr(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	creds, bad, err := s.Load(secmem.New(nil))
	is.NoErr(err)
	is.Equal(len(creds), 1)
	is.Equal(len(bad), 4)
	for _, e := range bad {
		is.True(!strings.Contains(e.Error(), "SEKRT")) // errors never quote the value
	}
	creds[0].Value.Free()
}

func TestOpenRefusesUnsafeDir(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	base := t.TempDir()
	is.NoErr(os.Symlink(t.TempDir(), filepath.Join(base, "link")))
	_, err := Open(filepath.Join(base, "link", "credentials"))
	is.True(err != nil) // the state dir is a symlink
	wide := filepath.Join(base, "wide", "credentials")
	is.NoErr(os.MkdirAll(wide, 0o755))
	_, err = Open(wide)
	is.NoErr(err) // a too-wide mode is tightened
	fi, _ := os.Stat(wide)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o700))
}

// FuzzDecode checks that Decode never panics and that what it accepts is a
// valid credential whose value it returns exactly.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(Magic + `{"name":"a","value_len":1,"destinations":["https://a.example"],"targets":[{"target":"query:k"}]}` + "\nv"))
	f.Add([]byte(Magic + "{}\n"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, v, err := Decode(raw)
		if err != nil {
			return
		}
		if len(v) == 0 || len(v) > secretdapi.MaxValueLen || m.Name == "" || len(m.Destinations) == 0 || len(m.Targets) == 0 {
			t.Fatalf("accepted an invalid credential: %+v", m)
		}
		if !bytes.HasSuffix(raw, v) {
			t.Fatal("value is not the file's tail")
		}
	})
}

// TestBasicTargetRoundTrip: a basic:password target's fixed user-id is
// kept on disk; a file whose value cannot be a Basic user-id is skipped
// as damaged (a hand-edited file cannot bypass the put check).
func TestBasicTargetRoundTrip(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s, err := Open(filepath.Join(t.TempDir(), "secretd", "credentials"))
	is.NoErr(err)
	m := meta("git")
	m.Targets = []secretdapi.TargetSpec{{Target: "basic:password", BasicUser: "x-access-token"}}
	is.NoErr(s.Write(m, []byte("pw-value")))
	bad := meta("bad")
	bad.Targets = []secretdapi.TargetSpec{{Target: "basic:user"}}
	is.NoErr(s.Write(bad, []byte("user:colon")))
	alloc := secmem.New(slog.New(slog.DiscardHandler))
	creds, damaged, err := s.Load(alloc)
	is.NoErr(err)
	is.Equal(len(damaged), 1)
	is.Equal(len(creds), 1)
	is.Equal(creds[0].Meta.Targets, m.Targets)
	creds[0].Value.Free()
}
