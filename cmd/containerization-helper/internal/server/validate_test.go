package server

import (
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/wire"
)

func TestIDs(t *testing.T) {
	t.Parallel()
	id, err := newContainerID()
	is.New(t).NoErr(err)
	for _, tc := range []struct {
		name string
		id   string
		ok   bool
	}{
		{"generated", id, true},
		{"traversal", "../evil", false},
		{"prefix only", "hk-", false},
		{"upper hex", "hk-00000000000000AA", false},
		{"long", "hk-00000000000000aa0", false},
		{"foreign name", "my-container", false},
	} {
		t.Run(tc.name, func(t *testing.T) { is.New(t).Equal(validID(tc.id), tc.ok) })
	}
	is.New(t).True(canonicalUUID("0123abcd-0000-4000-8000-00000000000f"))
	is.New(t).True(!canonicalUUID("0123ABCD-0000-4000-8000-00000000000F"))
}

// A plan's hash is a function of its canonical encoding: the same plan
// hashes the same, any field change changes it.
func TestPlanHash(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	p := Plan{Kind: helperapi.KindCreate, ContainerID: "hk-00000000000000aa", Command: []string{"/bin/true"}, Nonce: "00"}
	a, err := wire.Marshal(&p)
	is.NoErr(err)
	b, err := wire.Marshal(&p)
	is.NoErr(err)
	is.Equal(hashOf(a), hashOf(b))
	p.Context.Fence = 2
	c, err := wire.Marshal(&p)
	is.NoErr(err)
	is.True(hashOf(a) != hashOf(c))
	is.True(validDigest(hashOf(a)))
}

func TestCheckCreate(t *testing.T) {
	t.Parallel()
	img := &helperapi.ImageRef{Layout: "/layout", ManifestDigest: "sha256:" + strings.Repeat("a", 64)}
	for _, tc := range []struct {
		name string
		req  helperapi.PlanRequest
		code string
	}{
		{"ok", helperapi.PlanRequest{Image: img, Command: []string{"/bin/true"}, Env: []string{"A=1"}}, ""},
		{"terminal", helperapi.PlanRequest{Image: img, Command: []string{"/bin/true"}, Terminal: true}, wire.CodeRequestInvalid},
		{"caller id", helperapi.PlanRequest{Image: img, Command: []string{"/bin/true"}, ContainerID: "hk-00000000000000aa"}, wire.CodeRequestInvalid},
		{"relative layout", helperapi.PlanRequest{Image: &helperapi.ImageRef{Layout: "l", ManifestDigest: img.ManifestDigest}, Command: []string{"x"}}, CodePathUnsafe},
		{"unclean layout", helperapi.PlanRequest{Image: &helperapi.ImageRef{Layout: "/a/../b", ManifestDigest: img.ManifestDigest}, Command: []string{"x"}}, CodePathUnsafe},
		{"tag, not digest", helperapi.PlanRequest{Image: &helperapi.ImageRef{Layout: "/l", ManifestDigest: "latest"}, Command: []string{"x"}}, wire.CodeRequestInvalid},
		{"no command", helperapi.PlanRequest{Image: img}, wire.CodeRequestInvalid},
		{"NUL in arg", helperapi.PlanRequest{Image: img, Command: []string{"/bin/true", "a\x00b"}}, wire.CodeRequestInvalid},
		{"duplicate env", helperapi.PlanRequest{Image: img, Command: []string{"x"}, Env: []string{"A=1", "A=2"}}, wire.CodeRequestInvalid},
		{"env without =", helperapi.PlanRequest{Image: img, Command: []string{"x"}, Env: []string{"SECRET"}}, wire.CodeRequestInvalid},
		{"too big", helperapi.PlanRequest{Image: img, Command: []string{"x", strings.Repeat("a", helperapi.MaxArgBytes)}}, wire.CodeRequestInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			err := checkCreate(&tc.req)
			is.Equal(wire.CodeOf(err), tc.code)
			if err != nil {
				is.True(!strings.Contains(err.Error(), "a\x00b")) // messages never quote a value
			}
		})
	}
}
