package netns

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"golang.org/x/net/dns/dnsmessage"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

func TestShape(t *testing.T) {
	t.Parallel()
	known := KnownSuffixes(Resolvable([]string{"https://api.example.com", "https://*.svc.example.org:8443", "tcp://db.example.net:5432"}, nil))
	tests := []struct{ name, in, want string }{
		{"a name the policy names", "api.example.com", "api.example.com"},
		{"a subdomain of it", "x.api.example.com", "{1}.api.example.com"},
		{"data in a label of a known zone", dnsCanary + ".example.com.", "{24}.example.com"},
		{"an unknown zone", "k3y.evil.com", "{3}.{4}.com"},
		{"an unknown top-level label", dnsCanary + ".exfil.example", "{24}.{5}.{7}"},
		{"data as the whole name", dnsCanary, "{24}"},
		{"a wildcard's suffix", "a.b.svc.example.org", "{1}.{1}.svc.example.org"},
		{"upper case", "API.Example.COM.", "api.example.com"},
		{"a known label below an unknown one", "com.evil.com", "{3}.{4}.com"},
		{"the root", ".", "."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(Shape(tt.in, known), tt.want)
		})
	}
}

// TestResolvableDestinations: a credential's destination resolves though
// network.allow does not list it; a name neither names stays refused; a
// destination that is not an origin adds nothing.
func TestResolvableDestinations(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	d := NewDNS(NewNames(0), Resolvable([]string{"https://api.example.com"}, []string{"https://llm.example.net:8443", "tcp://raw.example.net:22", "not an origin"}), slog.New(slog.DiscardHandler))
	for _, tt := range []struct {
		name  string
		rcode dnsmessage.RCode
	}{
		{"api.example.com.", dnsmessage.RCodeSuccess},
		{"llm.example.net.", dnsmessage.RCodeSuccess},
		{"x.llm.example.net.", dnsmessage.RCodeRefused}, // a destination is exact
		{"raw.example.net.", dnsmessage.RCodeRefused},   // tcp:// is never a destination
		{"other.example.net.", dnsmessage.RCodeRefused},
	} {
		rc, _, _ := parsed(t, d.Answer(query(t, tt.name, dnsmessage.TypeA), nil))
		is.Equal(rc, tt.rcode) // tt.name
	}
}

// TestRefusalsCounted: every refusal is counted by reason and shape,
// whatever the log's rate limit let through; past MaxRefusalKeys shapes
// the rest count under "*"; Take empties the counts; no label the
// policy does not name is in the report.
func TestRefusalsCounted(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	d := testDNS(t, 1, nil, "https://api.example.com", "https://*.svc.example.org")
	_, ok := d.Refusals().Take()
	is.True(!ok) // nothing refused yet
	for range 100 {
		d.Answer(query(t, dnsCanary+".exfil.example.", dnsmessage.TypeA), nil)
	}
	d.Answer(query(t, "a.svc.example.org.", dnsmessage.TypeA), nil) // the one name the limit allows
	d.Answer(query(t, "b.svc.example.org.", dnsmessage.TypeA), nil) // past it
	rep, ok := d.Refusals().Take()
	is.True(ok)
	is.Equal(rep.Count, uint64(101))
	is.Equal(rep.Refusals, []RefusalCount{
		{Reason: RefusedExhausted, Shape: "{1}.svc.example.org", Count: 1},
		{Reason: RefusedPolicy, Shape: "{24}.{5}.{7}", Count: 100},
	})
	is.True(rep.Since <= rep.Until && rep.Since > 0)
	_, ok = d.Refusals().Take()
	is.True(!ok) // taken

	for i := range MaxRefusalKeys + 10 {
		d.Answer(query(t, strings.Repeat("x", i+1)+".evil.example.", dnsmessage.TypeA), nil)
	}
	rep, ok = d.Refusals().Take()
	is.True(ok)
	is.Equal(len(rep.Refusals), MaxRefusalKeys+1)
	is.Equal(rep.Refusals[0], RefusalCount{Reason: RefusedPolicy, Shape: "*", Count: 10}) // "*" sorts before "{"
	is.True(!strings.Contains(fmt.Sprint(rep), dnsCanary))
}

// TestProbeNftables: the start-up probe installs the rules in a
// throwaway namespace here (the kernel has nftables); it leaves no
// thread in a foreign namespace behind.
func TestProbeNftables(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	is := is.New(t)
	before := runtime.NumGoroutine()
	is.NoErr(ProbeNftables())
	// The count is the process's: a goroutine of an earlier test may still
	// be ending, so the probe's leftovers are waited for, not sampled once.
	n := runtime.NumGoroutine()
	for end := time.Now().Add(10 * time.Second); n > before+1 && time.Now().Before(end); n = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	is.True(n <= before+1) // the probe's thread and goroutines are gone
}

// TestProbeNftablesUnprivileged: without a namespace the probe says so
// with runtime.unavailable, never as a missing nftables.
func TestProbeNftablesUnprivileged(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs only where namespaces cannot be made")
	}
	is := is.New(t)
	err := ProbeNftables()
	is.Equal(wire.CodeOf(err), api.CodeRuntimeUnavailable)
}
