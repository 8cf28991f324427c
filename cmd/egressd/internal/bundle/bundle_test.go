package bundle

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/inject"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

const (
	token  = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	canary = "canary-Zq8v1-secret-value"
	ph     = "hkp_abcdefghijklmnopqrstuvwxyz234567"
)

// fakeConsumer answers lease.consume from a fixed table (unit tests of the
// error paths only; integration tests use the real secretd).
type fakeConsumer struct {
	leases map[string]secretdapi.Lease
	err    error
	calls  int
}

func (f *fakeConsumer) LeaseConsume(_ context.Context, _ string, handles [][]byte) (*secretdapi.LeaseConsumeResponse, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	out := &secretdapi.LeaseConsumeResponse{}
	for _, h := range handles {
		l, ok := f.leases[string(h)]
		if !ok {
			return nil, wire.Errorf(secretdapi.CodeLeaseNotFound, "no such lease")
		}
		l.Handle = h
		l.Value = append([]byte(nil), l.Value...)
		out.Leases = append(out.Leases, l)
	}
	return out, nil
}

func goodLease() secretdapi.Lease {
	return secretdapi.Lease{Credential: "api", Destination: "https://api.test", Placeholder: ph,
		Target: "header:Authorization", Template: "Bearer {}", Value: []byte(canary)}
}

func register(r *Registry, inv string, handles ...string) (*Bundle, error) {
	req := &egressdapi.BundleRegisterRequest{Invocation: inv, ProxyToken: token}
	for _, h := range handles {
		req.Handles = append(req.Handles, []byte(h))
	}
	return r.Register(context.Background(), req)
}

func (c *Credential) placedOrRender() string {
	s, _ := c.PlacedHeader()
	return s
}

func TestRegisterAndDrop(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	sc := redact.NewScrubber()
	r := NewRegistry(&fakeConsumer{leases: map[string]secretdapi.Lease{"h1": goodLease()}}, sc)
	b, err := register(r, "inv-1", "h1")
	is.NoErr(err)
	is.True(b.HasCredentials())
	is.True(b.CheckToken(token))
	is.True(!b.CheckToken(token[:42] + "B"))
	is.True(r.Holds([]byte(canary)))
	is.True(r.HoldsString(canary))
	is.True(!r.HoldsString(canary[1:] + "x")) // same length, another value
	is.True(!r.HoldsString(canary + "x"))
	is.Equal(sc.Scrub("x "+canary), "x "+redact.Redacted)
	o, _ := netguard.ParseOrigin("https://api.test")
	is.True(b.Allows(o, "DELETE"))
	is.True(r.IsDestination(o))
	other, _ := netguard.ParseOrigin("https://api.test:8443")
	is.True(!r.IsDestination(other)) // another port is another origin
	n, c := r.Counts()
	is.Equal([2]int{n, c}, [2]int{1, 1})

	var cred *Credential
	is.NoErr(b.Use(func(cs []*Credential) error { cred = cs[0]; return nil }))
	is.Equal(string(cred.Value()), canary)
	placed, err := cred.PlacedHeader() // rendered once, at consumption
	is.NoErr(err)
	want, err := inject.Render(cred.Template, []byte(cred.Placeholder))
	is.NoErr(err)
	is.Equal(placed, want)
	is.Equal((&Credential{Template: "Token {}", Placeholder: "hkp_x"}).placedOrRender(), "Token hkp_x") // not consumed: rendered when asked

	_, err = register(r, "inv-1")
	is.Equal(wire.CodeOf(err), egressdapi.CodeBundleExists)

	is.NoErr(r.Drop("inv-1"))
	is.Equal(cred.Value(), nil) // zeroed
	is.True(!r.Holds([]byte(canary)))
	is.True(!r.HoldsString(canary))
	is.Equal(sc.Scrub(canary), canary) // unregistered
	is.True(!r.IsDestination(o))       // no held credential goes there any more
	is.Equal(wire.CodeOf(b.Use(func([]*Credential) error { return nil })), egressdapi.CodeBundleUnknown)
	is.Equal(wire.CodeOf(r.Drop("inv-1")), egressdapi.CodeBundleUnknown)
	_, err = r.Get("inv-1")
	is.Equal(wire.CodeOf(err), egressdapi.CodeBundleUnknown)
}

// TestOwners: a bundle keeps its owner id; a register never replaces an
// existing bundle, whoever owns it (bundle.exists, and the existing one
// still holds its credential); a drop that names an owner drops only that
// owner's bundle (bundle.owner_mismatch otherwise, nothing dropped); List
// selects by owner and invocation and shows no secret.
func TestOwners(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r := NewRegistry(&fakeConsumer{leases: map[string]secretdapi.Lease{"h1": goodLease()}}, redact.NewScrubber())
	reg := func(inv, owner string, handles ...string) error {
		req := &egressdapi.BundleRegisterRequest{Invocation: inv, ProxyToken: token, Owner: owner}
		for _, h := range handles {
			req.Handles = append(req.Handles, []byte(h))
		}
		_, err := r.Register(context.Background(), req)
		return err
	}
	is.NoErr(reg("inv-a", "sv-a", "h1"))
	is.NoErr(reg("inv-b", "sv-b"))
	is.NoErr(reg("inv-c", ""))
	for _, owner := range []string{"sv-a", "sv-b", ""} {
		is.Equal(wire.CodeOf(reg("inv-a", owner)), egressdapi.CodeBundleExists) // refused, same owner or not
	}
	b, err := r.Get("inv-a")
	is.NoErr(err)
	is.Equal(b.Owner, "sv-a")
	is.True(b.HasCredentials()) // the existing bundle is intact
	is.True(r.Holds([]byte(canary)))

	all := r.List("", "")
	is.Equal(len(all), 3)
	is.Equal(all[0].Invocation, "inv-a")
	is.True(all[0].Credentialed)
	is.True(all[0].RegisteredAt > 0)
	is.True(!all[1].Credentialed)
	is.Equal(len(r.List("", "sv-a")), 1)
	is.Equal(len(r.List("inv-b", "sv-a")), 0)
	is.Equal(r.List("inv-b", "")[0].Owner, "sv-b")
	dump := fmt.Sprintf("%+v", all)
	is.True(!strings.Contains(dump, canary))
	is.True(!strings.Contains(dump, token))
	is.True(!strings.Contains(dump, ph))
	is.True(!strings.Contains(dump, "h1"))

	is.Equal(wire.CodeOf(r.DropOwned("inv-a", "sv-b")), egressdapi.CodeBundleOwnerMismatch)
	is.Equal(wire.CodeOf(r.DropOwned("inv-c", "sv-a")), egressdapi.CodeBundleOwnerMismatch) // an unowned bundle is nobody's to drop by owner
	is.True(r.Holds([]byte(canary)))                                                        // refused drops changed nothing
	is.Equal(len(r.List("", "")), 3)
	is.NoErr(r.DropOwned("inv-a", "sv-a"))
	is.True(!r.Holds([]byte(canary)))
	is.Equal(wire.CodeOf(r.DropOwned("inv-a", "sv-a")), egressdapi.CodeBundleUnknown)
	is.NoErr(r.DropOwned("inv-b", "")) // no owner named: any bundle, as before
	is.NoErr(reg("inv-a", "sv-b"))     // once dropped, the id is free for anyone
}

func TestRegisterNoHandlesNeedsNoSecretd(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r := NewRegistry(nil, redact.NewScrubber())
	b, err := register(r, "inv-2")
	is.NoErr(err)
	is.True(!b.HasCredentials())
	_, err = register(r, "inv-3", "h")
	is.Equal(wire.CodeOf(err), egressdapi.CodeBundleConsumeFailed)
}

func TestRegisterInvalid(t *testing.T) {
	t.Parallel()
	r := NewRegistry(&fakeConsumer{}, redact.NewScrubber())
	for _, req := range []egressdapi.BundleRegisterRequest{
		{Invocation: "Inv", ProxyToken: token},
		{Invocation: "", ProxyToken: token},
		{Invocation: strings.Repeat("a", 65), ProxyToken: token},
		{Invocation: "inv", ProxyToken: "short"},
		{Invocation: "inv", ProxyToken: token[:42] + "="},
		{Invocation: "inv", ProxyToken: token, Handles: [][]byte{{}}},
		{Invocation: "inv", ProxyToken: token, Handles: [][]byte{bytes.Repeat([]byte("h"), 65)}},
		{Invocation: "inv", ProxyToken: token, Handles: [][]byte{[]byte("a"), []byte("a")}},
		{Invocation: "inv", ProxyToken: token, Policy: egressdapi.Policy{Allow: []egressdapi.AllowRule{{Origin: "http://api.test"}}}},
		{Invocation: "inv", ProxyToken: token, Owner: "SV-1"},
		{Invocation: "inv", ProxyToken: token, Owner: strings.Repeat("o", 65)},
	} {
		_, err := r.Register(context.Background(), &req)
		is.New(t).Equal(wire.CodeOf(err), egressdapi.CodeBundleInvalid)
	}
}

func TestConsumeFailuresKeepNothing(t *testing.T) {
	t.Parallel()
	mut := func(f func(*secretdapi.Lease)) secretdapi.Lease { l := goodLease(); f(&l); return l }
	for _, tc := range []struct {
		name string
		bad  secretdapi.Lease
	}{
		{"plaintext destination", mut(func(l *secretdapi.Lease) { l.Destination = "http://api.test" })},
		{"non-canonical destination", mut(func(l *secretdapi.Lease) { l.Destination = "https://API.test:443" })},
		{"bad target", mut(func(l *secretdapi.Lease) { l.Target = "cookie:x" })},
		{"bad template", mut(func(l *secretdapi.Lease) { l.Template = "Bearer" })},
		{"template on query", mut(func(l *secretdapi.Lease) { l.Target = "query:k" })},
		{"empty value", mut(func(l *secretdapi.Lease) { l.Value = nil })},
		{"bad placeholder", mut(func(l *secretdapi.Lease) { l.Placeholder = "hkp_x" })},
		{"basic_user on a header", mut(func(l *secretdapi.Lease) { l.BasicUser = "u" })},
		{"basic_user on basic:user", mut(func(l *secretdapi.Lease) { l.Target, l.Template, l.BasicUser = "basic:user", "", "u" })},
		{"basic_user with a colon", mut(func(l *secretdapi.Lease) { l.Target, l.Template, l.BasicUser = "basic:password", "", "a:b" })},
		{"basic_user too long", mut(func(l *secretdapi.Lease) {
			l.Target, l.Template, l.BasicUser = "basic:password", "", strings.Repeat("u", secretdapi.MaxBasicUserLen+1)
		})},
		{"basic user value with a colon", mut(func(l *secretdapi.Lease) { l.Target, l.Template, l.Value = "basic:user", "", []byte("a:"+canary) })},
		{"basic password value with a CR", mut(func(l *secretdapi.Lease) { l.Target, l.Template, l.Value = "basic:password", "", []byte(canary+"\r") })},
		{"basic with a template", mut(func(l *secretdapi.Lease) { l.Target = "basic:password" })},
		{"basic other half", mut(func(l *secretdapi.Lease) { l.Target, l.Template = "basic:both", "" })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			sc := redact.NewScrubber()
			r := NewRegistry(&fakeConsumer{leases: map[string]secretdapi.Lease{"good": goodLease(), "bad": tc.bad}}, sc)
			_, err := register(r, "inv", "good", "bad")
			is.Equal(wire.CodeOf(err), egressdapi.CodeBundleConsumeFailed)
			is.True(!strings.Contains(err.Error(), canary))
			n, c := r.Counts()
			is.Equal(n+c, 0)
			is.True(!r.Holds([]byte(canary)))
			is.Equal(sc.Scrub(canary), canary)
			_, err = register(r, "inv") // the invocation is free again
			is.NoErr(err)
		})
	}
}

func TestConsumeErrorFromSecretd(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	fc := &fakeConsumer{leases: map[string]secretdapi.Lease{"good": goodLease()}}
	r := NewRegistry(fc, redact.NewScrubber())
	_, err := register(r, "inv", "good", "unknown")
	is.Equal(wire.CodeOf(err), egressdapi.CodeBundleConsumeFailed)
	is.True(strings.Contains(err.Error(), secretdapi.CodeLeaseNotFound))
	n, _ := r.Counts()
	is.Equal(n, 0)
}

func TestConcurrentRegisterOneWins(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r := NewRegistry(nil, redact.NewScrubber())
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 16 {
		wg.Go(func() {
			if _, err := register(r, "same"); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	is.Equal(wins, 1)
}

func TestStats(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r := NewRegistry(nil, redact.NewScrubber())
	b, _ := register(r, "b-inv")
	_, _ = register(r, "a-inv")
	b.AddEgress(100)
	b.AddRefused()
	all, err := r.Stats("")
	is.NoErr(err)
	is.Equal(len(all), 2)
	is.Equal(all[0].Invocation, "a-inv")
	one, err := r.Stats("b-inv")
	is.NoErr(err)
	is.Equal(one[0], egressdapi.InvocationStats{Invocation: "b-inv", NetworkEgressBytes: 100, Refused: 1, Requests: 1})
	_, err = r.Stats("nope")
	is.Equal(wire.CodeOf(err), egressdapi.CodeBundleUnknown)
}

// TestPlaceholderNamesOneInvocation: a placeholder another invocation's
// bundle holds is refused at register (bundle.consume_failed, nothing
// kept, the value zeroed and unregistered), the same placeholder for the
// same invocation after a drop is fine, and once the holder is dropped
// another invocation may take it.
func TestPlaceholderNamesOneInvocation(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	sc := redact.NewScrubber()
	r := NewRegistry(&fakeConsumer{leases: map[string]secretdapi.Lease{"h1": goodLease(), "h2": goodLease()}}, sc)
	_, err := register(r, "inv-1", "h1")
	is.NoErr(err)
	_, err = register(r, "inv-2", "h2")
	is.Equal(wire.CodeOf(err), egressdapi.CodeBundleConsumeFailed)
	is.True(!strings.Contains(err.Error(), ph))
	_, err = r.Get("inv-2")
	is.Equal(wire.CodeOf(err), egressdapi.CodeBundleUnknown) // nothing kept
	owner, ok := r.PlaceholderOwner(ph)
	is.True(ok)
	is.Equal(owner, "inv-1") // still inv-1's
	n, c := r.Counts()
	is.Equal([2]int{n, c}, [2]int{1, 1})

	is.NoErr(r.Drop("inv-1"))
	_, err = register(r, "inv-1", "h1") // re-registered with its own placeholder
	is.NoErr(err)
	is.NoErr(r.Drop("inv-1"))
	_, err = register(r, "inv-2", "h2") // free now
	is.NoErr(err)
	owner, _ = r.PlaceholderOwner(ph)
	is.Equal(owner, "inv-2")
	is.Equal(sc.Scrub(canary), redact.Redacted)
}
