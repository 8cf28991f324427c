package egress

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// TestProxyEnvNoProxy: NO_PROXY is the namespace's loopback only in
// network isolated; every CA variable names the bundle; WGETRC only when
// there is one.
func TestProxyEnvNoProxy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		isolated bool
		wgetrc   string
		noProxy  string
	}{
		{"isolated", true, "/pub/supervisord-wgetrc", IsolatedNoProxy},
		{"host", false, "/pub/supervisord-wgetrc", ""},
		{"no wgetrc", true, "", IsolatedNoProxy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			env := map[string]string{}
			ProxyEnv(env, Vars{Invocation: "id", Token: "tok", Addr: "127.0.0.1:4750", CABundle: "/pub/ca.pem", WgetRC: tc.wgetrc, Isolated: tc.isolated})
			for _, k := range ProxyVars {
				is.Equal(env[k], "http://id:tok@127.0.0.1:4750")
			}
			for _, k := range CAVars {
				is.Equal(env[k], "/pub/ca.pem")
			}
			is.Equal(env["NO_PROXY"], tc.noProxy)
			is.Equal(env["no_proxy"], tc.noProxy)
			w, ok := env["WGETRC"]
			is.Equal(ok, tc.wgetrc != "")
			is.Equal(w, tc.wgetrc)
			is.Equal(len(CAVars), 10)
		})
	}
}

// TestValidateCredentialEnv refuses every variable supervisord sets itself.
func TestValidateCredentialEnv(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"WGETRC", "GIT_SSL_CAINFO", "npm_config_cafile", "no_proxy", "HTTPS_PROXY", "HOSTKIT_X"} {
		err := Validate([]api.CredentialSpec{{Credential: "c", Env: k}})
		is.New(t).Equal(wire.CodeOf(err), api.CodeInstanceInvalid)
	}
	is.New(t).NoErr(Validate([]api.CredentialSpec{{Credential: "c", Env: "API_TOKEN"}}))
}

// TestValidateIsolated: a literal-loopback destination is refused (named
// in the message); other origins, names that merely resolve to loopback,
// and an omitted destination pass.
func TestValidateIsolated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dest string
		bad  bool
	}{
		{"https://127.0.0.1:8443", true},
		{"https://127.9.9.9", true},
		{"http://[::1]:3000", true},
		{"https://localhost:9000", true},
		{"https://LOCALHOST", true},
		{"https://api.example.com", false},
		{"https://localhost.example.com", false},
		{"https://[::ffff:127.0.0.1]", false}, // not a literal-loopback shape (lib/netguard)
		{"https://10.0.0.1", false},
		{"", false},
		{"not an origin", false}, // secretd judges it
	} {
		t.Run(tc.dest, func(t *testing.T) {
			is := is.New(t)
			err := ValidateIsolated([]api.CredentialSpec{{Credential: "cred1", Env: "T", Destination: tc.dest}})
			if !tc.bad {
				is.NoErr(err)
				return
			}
			is.Equal(wire.CodeOf(err), api.CodeInstanceInvalid)
			is.True(strings.Contains(err.Error(), "cred1"))
		})
	}
}

// TestEnsureWgetRC: the shared file is 0644 whatever the umask, holds
// only the CA line, is rewritten when the bundle moves and left alone
// otherwise; a bundle path with a newline is refused.
func TestEnsureWgetRC(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := t.TempDir()
	p, err := ensureWgetRC(dir, "/pub/ca.pem")
	is.NoErr(err)
	is.Equal(p, filepath.Join(dir, WgetRCName))
	fi, err := os.Stat(p)
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o644))
	b, _ := os.ReadFile(p)
	is.True(strings.HasSuffix(string(b), "\nca_certificate = /pub/ca.pem\n"))
	is.Equal(strings.Count(string(b), "\n"), 2) // a comment and the CA line
	before := fi.ModTime()
	_, err = ensureWgetRC(dir, "/pub/ca.pem")
	is.NoErr(err)
	fi, _ = os.Stat(p)
	is.Equal(fi.ModTime(), before) // unchanged: not rewritten
	_, err = ensureWgetRC(dir, "/other/ca.pem")
	is.NoErr(err)
	b, _ = os.ReadFile(p)
	is.True(strings.HasSuffix(string(b), "\nca_certificate = /other/ca.pem\n"))
	_, err = ensureWgetRC(dir, "/x\nhttps_proxy = http://evil")
	is.True(err != nil)
	ents, _ := os.ReadDir(dir)
	is.Equal(len(ents), 1) // no temporary file left
}
