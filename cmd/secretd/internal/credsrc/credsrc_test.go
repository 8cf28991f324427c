package credsrc

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/cmd/secretd/internal/credential"
	"hostkit.dev/cmd/secretd/internal/secmem"
)

const canary = "CANARY-systemd-credential-51c0"

// systemdDir lays files out as systemd does for LoadCredential=: regular
// files named by credential id, mode 0400, in a directory made read-only
// (0500) once populated.
func systemdDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "credentials", "secretd.service")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	return dir
}

const goodMeta = `{"version": 1, "credentials": [
 {"name": "github", "file": "github-token", "destinations": ["https://API.github.com:443"],
  "targets": [{"target": "header:Authorization", "template": "Bearer {}"}], "strip_newline": true},
 {"name": "stripe", "destinations": ["https://api.stripe.com"], "targets": [{"target": "query:key"}]}]}`

func TestLoadSystemdLayout(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := systemdDir(t, map[string]string{
		MetaFile:       goodMeta,
		"github-token": canary + "\n",
		"stripe":       canary + "-2",
		"stray":        "not named in the metadata",
	})
	alloc := secmem.New(slog.New(slog.DiscardHandler))
	res, err := Load(dir, alloc)
	is.NoErr(err)
	is.Equal(res.Unused, []string{"stray"})
	is.Equal(len(res.Credentials), 2)
	gh := res.Credentials[0]
	is.Equal(gh.Meta.Name, "github")
	is.Equal(gh.Meta.Source, credential.SourceSystemd)
	is.Equal(gh.Meta.Destinations, []string{"https://api.github.com"})
	is.Equal(string(gh.Value.Bytes()), canary) // newline stripped
	is.Equal(string(res.Credentials[1].Value.Bytes()), canary+"-2")
	for _, c := range res.Credentials {
		c.Value.Free()
	}
	is.Equal(alloc.Live(), int64(0))
}

func TestLoadNothing(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	res, err := Load("", secmem.New(nil))
	is.NoErr(err)
	is.Equal(len(res.Credentials), 0)
	res, err = Load(systemdDir(t, map[string]string{"orphan": canary}), secmem.New(nil))
	is.NoErr(err)
	is.Equal(res.Unused, []string{"orphan"})
}

func TestLoadFailsClosed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		files map[string]string
		link  bool
	}{
		{"missing file", map[string]string{MetaFile: goodMeta, "github-token": canary}, false},
		{"unknown field", map[string]string{MetaFile: `{"version":1,"credentials":[],"extra":1}`}, false},
		{"wrong version", map[string]string{MetaFile: `{"version":2,"credentials":[]}`}, false},
		{"plaintext destination", map[string]string{MetaFile: `{"version":1,"credentials":[{"name":"a","destinations":["http://a.example"],"targets":[{"target":"query:k"}]}]}`, "a": canary}, false},
		{"empty value", map[string]string{MetaFile: `{"version":1,"credentials":[{"name":"a","destinations":["https://a.example"],"targets":[{"target":"query:k"}]}]}`, "a": ""}, false},
		{"duplicate name", map[string]string{MetaFile: `{"version":1,"credentials":[{"name":"a","destinations":["https://a.example"],"targets":[{"target":"query:k"}]},{"name":"a","destinations":["https://a.example"],"targets":[{"target":"query:k"}]}]}`, "a": canary}, false},
		{"path in file", map[string]string{MetaFile: `{"version":1,"credentials":[{"name":"a","file":"../x","destinations":["https://a.example"],"targets":[{"target":"query:k"}]}]}`}, false},
		{"symlink", map[string]string{MetaFile: `{"version":1,"credentials":[{"name":"a","file":"link","destinations":["https://a.example"],"targets":[{"target":"query:k"}]}]}`}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			dir := systemdDir(t, tt.files)
			if tt.link {
				os.Chmod(dir, 0o700)
				target := filepath.Join(t.TempDir(), "real")
				is.NoErr(os.WriteFile(target, []byte(canary), 0o400))
				is.NoErr(os.Symlink(target, filepath.Join(dir, "link")))
			}
			alloc := secmem.New(nil)
			_, err := Load(dir, alloc)
			is.True(err != nil)
			is.True(!strings.Contains(err.Error(), canary))
			is.Equal(alloc.Live(), int64(0)) // nothing half-imported stays in memory
		})
	}
}
