package credential

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/cmd/secretd/internal/secmem"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/wire"
)

func TestValidName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"simple", "github", true},
		{"digits and punctuation", "a0._-b", true},
		{"max length", strings.Repeat("a", 64), true},
		{"too long", strings.Repeat("a", 65), false},
		{"empty", "", false},
		{"leading dot", ".hidden", false},
		{"leading dash", "-x", false},
		{"upper case", "GitHub", false},
		{"slash", "a/b", false},
		{"space", "a b", false},
	} {
		t.Run(tt.name, func(t *testing.T) { is.New(t).Equal(ValidName(tt.in), tt.ok) })
	}
}

func TestCanonicalDestinations(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		in   []string
		out  []string
	}{
		{"canonicalized and deduplicated", []string{"HTTPS://API.Example.com:443", "https://api.example.com"}, []string{"https://api.example.com"}},
		{"loopback http", []string{"http://127.0.0.1:8080", "http://localhost"}, []string{"http://127.0.0.1:8080", "http://localhost"}},
		{"plaintext to a name", []string{"http://api.example.com"}, nil},
		{"path", []string{"https://api.example.com/v1"}, nil},
		{"wildcard", []string{"https://*.example.com"}, nil},
		{"userinfo", []string{"https://u:p@api.example.com"}, nil},
		{"none", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			out, err := CanonicalDestinations(tt.in)
			if tt.out == nil {
				is.Equal(wire.CodeOf(err), secretdapi.CodeCredentialInvalid)
				return
			}
			is.NoErr(err)
			is.Equal(out, tt.out)
		})
	}
}

func TestCheckTargets(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		in   []secretdapi.TargetSpec
		ok   bool
	}{
		{"header with template", []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}", Overwrite: true}}, true},
		{"header default template", []secretdapi.TargetSpec{{Target: "header:X-Api-Key"}}, true},
		{"query path body", []secretdapi.TargetSpec{{Target: "query:api_key"}, {Target: "path:token"}, {Target: "body:/auth/token"}}, true},
		{"pointer escapes", []secretdapi.TargetSpec{{Target: "body:/a~1b/c~0d"}}, true},
		{"bad pointer escape", []secretdapi.TargetSpec{{Target: "body:/a~2"}}, false},
		{"pointer without slash", []secretdapi.TargetSpec{{Target: "body:a"}}, false},
		{"template twice", []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "{} {}"}}, false},
		{"template without hole", []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer"}}, false},
		{"template on query", []secretdapi.TargetSpec{{Target: "query:k", Template: "x{}"}}, false},
		{"overwrite on body", []secretdapi.TargetSpec{{Target: "body:/k", Overwrite: true}}, false},
		{"bad header name", []secretdapi.TargetSpec{{Target: "header:Bad Name"}}, false},
		{"unknown kind", []secretdapi.TargetSpec{{Target: "cookie:x"}}, false},
		{"no name", []secretdapi.TargetSpec{{Target: "header:"}}, false},
		{"duplicate", []secretdapi.TargetSpec{{Target: "query:k"}, {Target: "query:k"}}, false},
		{"none", nil, false},
		{"basic password", []secretdapi.TargetSpec{{Target: "basic:password"}}, true},
		{"basic password with a fixed user", []secretdapi.TargetSpec{{Target: "basic:password", BasicUser: "x-access-token"}}, true},
		{"basic user", []secretdapi.TargetSpec{{Target: "basic:user"}}, true},
		{"basic beside a header", []secretdapi.TargetSpec{{Target: "basic:password"}, {Target: "header:Authorization", Template: "Bearer {}"}}, true},
		{"basic user with a fixed user", []secretdapi.TargetSpec{{Target: "basic:user", BasicUser: "u"}}, false},
		{"basic_user on a header", []secretdapi.TargetSpec{{Target: "header:Authorization", BasicUser: "u"}}, false},
		{"basic_user with a colon", []secretdapi.TargetSpec{{Target: "basic:password", BasicUser: "a:b"}}, false},
		{"basic_user with a control character", []secretdapi.TargetSpec{{Target: "basic:password", BasicUser: "a\x01b"}}, false},
		{"basic_user not UTF-8", []secretdapi.TargetSpec{{Target: "basic:password", BasicUser: "a\xffb"}}, false},
		{"basic_user too long", []secretdapi.TargetSpec{{Target: "basic:password", BasicUser: strings.Repeat("u", secretdapi.MaxBasicUserLen+1)}}, false},
		{"basic_user at the limit", []secretdapi.TargetSpec{{Target: "basic:password", BasicUser: strings.Repeat("u", secretdapi.MaxBasicUserLen)}}, true},
		{"basic other half", []secretdapi.TargetSpec{{Target: "basic:both"}}, false},
		{"basic template", []secretdapi.TargetSpec{{Target: "basic:password", Template: "{}"}}, false},
		{"basic overwrite", []secretdapi.TargetSpec{{Target: "basic:user", Overwrite: true}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			out, err := CheckTargets(tt.in)
			if !tt.ok {
				is.Equal(wire.CodeOf(err), secretdapi.CodeCredentialInvalid)
				return
			}
			is.NoErr(err)
			for _, o := range out {
				if strings.HasPrefix(o.Target, "header:") {
					is.True(strings.Contains(o.Template, "{}"))
				}
			}
		})
	}
}

// TestCheckBasicValue: a value that may be sent as a Basic half is valid
// UTF-8 without control characters, and as the user-id also without ':'
// (the server splits at the first one); other targets take any bytes.
func TestCheckBasicValue(t *testing.T) {
	t.Parallel()
	pw := []secretdapi.TargetSpec{{Target: "basic:password"}}
	user := []secretdapi.TargetSpec{{Target: "basic:user"}}
	hdr := []secretdapi.TargetSpec{{Target: "header:Authorization"}}
	for _, tt := range []struct {
		name  string
		ts    []secretdapi.TargetSpec
		value string
		ok    bool
	}{
		{"password", pw, "s3cret:with:colons and spaces", true},
		{"password utf-8", pw, "pässwörd", true},
		{"password with CR LF", pw, "a\r\nb", false},
		{"password with NUL", pw, "a\x00b", false},
		{"password with DEL", pw, "a\x7fb", false},
		{"password not UTF-8", pw, "a\xffb", false},
		{"user", user, "ghp_token", true},
		{"user with a colon", user, "a:b", false},
		{"user with a tab", user, "a\tb", false},
		{"header takes any bytes", hdr, "a:\x01\xff", true},
		{"header and user: the user rules", append(hdr, user...), "a:b", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			err := CheckBasicValue(tt.ts, []byte(tt.value))
			if tt.ok {
				is.NoErr(err)
				return
			}
			is.Equal(wire.CodeOf(err), secretdapi.CodeCredentialInvalid)
			is.True(!strings.Contains(err.Error(), tt.value)) // never the value
		})
	}
}

func TestValidInvocation(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.True(ValidInvocation("0b7c6f1e-2d3a-4b5c-8d9e-0f1a2b3c4d5e"))
	is.True(!ValidInvocation(""))
	is.True(!ValidInvocation("UPPER"))
	is.True(!ValidInvocation(strings.Repeat("a", 65)))
	is.True(!ValidInvocation("a_b"))
}

// memStore is a Persister in memory that can be made to fail.
type memStore struct {
	files map[string][]byte
	fail  bool
}

func (m *memStore) Write(meta *secretdapi.CredentialMeta, value []byte) error {
	if m.fail {
		return errors.New("disk full")
	}
	m.files[meta.Name] = append([]byte(nil), value...)
	return nil
}

func (m *memStore) Remove(name string) error {
	if m.fail {
		return errors.New("disk full")
	}
	delete(m.files, name)
	return nil
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ms := &memStore{files: map[string][]byte{}}
	alloc := secmem.New(slog.New(slog.DiscardHandler))
	now := time.UnixMilli(1_800_000_000_000)
	r := NewRegistry(ms, alloc, func() time.Time { return now })
	req := &secretdapi.CredentialPutRequest{Name: "github", Value: []byte("v1-secret"),
		Destinations: []string{"https://api.github.com"}, Targets: []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}}}
	m, err := r.Put(req)
	is.NoErr(err)
	is.Equal(m.Version, uint64(1))
	is.Equal(m.Source, SourceStore)
	now = now.Add(time.Second)
	req.Value = []byte("v2-secret")
	m, err = r.Put(req)
	is.NoErr(err)
	is.Equal(m.Version, uint64(2))
	is.Equal(m.CreatedAt, int64(1_800_000_000_000))
	is.Equal(m.UpdatedAt, int64(1_800_000_001_000))
	is.NoErr(r.With("github", func(_ *secretdapi.CredentialMeta, v []byte) error {
		is.Equal(string(v), "v2-secret")
		return nil
	}))
	is.Equal(alloc.Live(), int64(1)) // the old value was freed

	// A failing store changes nothing.
	ms.fail = true
	req.Value = []byte("v3-secret")
	_, err = r.Put(req)
	is.True(err != nil)
	is.True(!strings.Contains(err.Error(), "v3-secret"))
	is.Equal(r.List()[0].Version, uint64(2))
	is.Equal(alloc.Live(), int64(1))
	ms.fail = false

	// systemd credentials are read-only and shadow stored ones.
	sysBuf, _ := alloc.Copy([]byte("from-systemd"))
	shadowed := r.Add(Credential{Meta: secretdapi.CredentialMeta{Name: "github", Source: SourceSystemd, Destinations: []string{"https://api.github.com"}}, Value: sysBuf})
	is.Equal(shadowed, []string{"github"})
	_, err = r.Put(req)
	is.Equal(wire.CodeOf(err), secretdapi.CodeCredentialReadOnly)
	is.Equal(wire.CodeOf(r.Delete("github")), secretdapi.CodeCredentialReadOnly)
	is.Equal(wire.CodeOf(r.Delete("nope")), secretdapi.CodeCredentialNotFound)
	is.Equal(wire.CodeOf(r.With("nope", nil)), secretdapi.CodeCredentialNotFound)

	// Invalid puts.
	for _, bad := range []*secretdapi.CredentialPutRequest{
		{Name: "Bad", Value: []byte("x"), Destinations: req.Destinations, Targets: req.Targets},
		{Name: "ok", Destinations: req.Destinations, Targets: req.Targets},
		{Name: "ok", Value: make([]byte, secretdapi.MaxValueLen+1), Destinations: req.Destinations, Targets: req.Targets},
		{Name: "ok", Value: []byte("user:with-colon"), Destinations: req.Destinations, Targets: []secretdapi.TargetSpec{{Target: "basic:user"}}},
		{Name: "ok", Value: []byte("pw"), Destinations: req.Destinations, Targets: []secretdapi.TargetSpec{{Target: "basic:user", BasicUser: "u"}}},
	} {
		_, err := r.Put(bad)
		is.Equal(wire.CodeOf(err), secretdapi.CodeCredentialInvalid)
	}
	r.Close()
	is.Equal(alloc.Live(), int64(0))
}
