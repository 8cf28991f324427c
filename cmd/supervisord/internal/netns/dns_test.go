package netns

import (
	"bytes"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
	"golang.org/x/net/dns/dnsmessage"
	"hostkit.dev/lib/netguard"
)

// dnsCanary is a value an agent might try to send out in a query's labels.
const dnsCanary = "c2stQ0FOQVJZLWRucy01YjFl"

func testDNS(t testing.TB, max int, log *bytes.Buffer, origins ...string) *DNS {
	t.Helper()
	var pats []netguard.Pattern
	for _, o := range origins {
		p, err := netguard.ParsePattern(o)
		if err != nil {
			t.Fatal(err)
		}
		pats = append(pats, p)
	}
	h := slog.Handler(slog.DiscardHandler)
	if log != nil {
		h = slog.NewJSONHandler(log, nil)
	}
	return NewDNS(NewNames(max), pats, slog.New(h))
}

func query(t testing.TB, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 0x1234, RecursionDesired: true})
	b.StartQuestions()
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	q, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// parsed is an answer's rcode and A records.
func parsed(t testing.TB, r []byte) (dnsmessage.RCode, []netip.Addr, uint32) {
	t.Helper()
	var m dnsmessage.Message
	if err := m.Unpack(r); err != nil {
		t.Fatalf("answer does not parse: %v", err)
	}
	var out []netip.Addr
	var ttl uint32
	for _, a := range m.Answers {
		if ar, ok := a.Body.(*dnsmessage.AResource); ok {
			out = append(out, netip.AddrFrom4(ar.A))
			ttl = a.Header.TTL
		}
	}
	return m.Header.RCode, out, ttl
}

// TestDNSAnswers: allowed names get a synthetic address (stable, distinct
// per name, TTL 60) for A and NODATA for every other type; names no
// origin covers are REFUSED and logged without their labels; past the
// limit a new name is REFUSED.
func TestDNSAnswers(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	d := testDNS(t, 3, &log, "https://api.example.com", "https://*.svc.example.org:8443", "tcp://db.example.net:5432")
	tests := []struct {
		name  string
		qname string
		typ   dnsmessage.Type
		rcode dnsmessage.RCode
		addrs int
	}{
		{"exact A", "api.example.com.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, 1},
		{"exact A, upper case", "API.Example.com.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, 1},
		{"wildcard A", "a.svc.example.org.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, 1},
		{"tcp rule A", "db.example.net.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, 1},
		{"AAAA is NODATA", "api.example.com.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, 0},
		{"HTTPS is NODATA", "api.example.com.", dnsmessage.Type(65), dnsmessage.RCodeSuccess, 0},
		{"SVCB is NODATA", "api.example.com.", dnsmessage.Type(64), dnsmessage.RCodeSuccess, 0},
		{"TXT is NODATA", "api.example.com.", dnsmessage.TypeTXT, dnsmessage.RCodeSuccess, 0},
		{"wildcard apex refused", "svc.example.org.", dnsmessage.TypeA, dnsmessage.RCodeRefused, 0},
		{"other name refused", "example.com.", dnsmessage.TypeA, dnsmessage.RCodeRefused, 0},
		{"data in labels refused", dnsCanary + ".exfil.example.", dnsmessage.TypeA, dnsmessage.RCodeRefused, 0},
		{"data in labels, TXT refused", dnsCanary + ".exfil.example.", dnsmessage.TypeTXT, dnsmessage.RCodeRefused, 0},
		{"past the limit refused", "b.svc.example.org.", dnsmessage.TypeA, dnsmessage.RCodeRefused, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			rc, addrs, ttl := parsed(t, d.Answer(query(t, tt.qname, tt.typ), nil))
			is.Equal(rc, tt.rcode)
			is.Equal(len(addrs), tt.addrs)
			for _, a := range addrs {
				is.True(SyntheticPrefix.Contains(a))
				is.Equal(ttl, uint32(SyntheticTTL))
			}
		})
	}
	is := is.New(t)
	_, a1, _ := parsed(t, d.Answer(query(t, "api.example.com.", dnsmessage.TypeA), nil))
	_, a2, _ := parsed(t, d.Answer(query(t, "api.example.com.", dnsmessage.TypeA), nil))
	_, a3, _ := parsed(t, d.Answer(query(t, "a.svc.example.org.", dnsmessage.TypeA), nil))
	is.Equal(a1, a2)        // stable
	is.True(a1[0] != a3[0]) // one address per name
	name, ok := d.names.Name(a1[0])
	is.True(ok)
	is.Equal(name, "api.example.com")
	_, ok = d.names.Name(netip.MustParseAddr("198.18.200.1"))
	is.True(!ok)
	is.True(bytes.Contains(log.Bytes(), []byte(`"reason":"names_exhausted"`)))
	is.True(bytes.Contains(log.Bytes(), []byte(`"shape":"{24}.{5}.{7}"`)))
	is.True(!bytes.Contains(log.Bytes(), []byte(dnsCanary))) // the labels stay out of the log
}

// TestDNSMalformed: what is not one question of class IN gets FORMERR,
// NOTIMP or REFUSED; a response or a short message gets nothing.
func TestDNSMalformed(t *testing.T) {
	t.Parallel()
	d := testDNS(t, 0, nil, "https://api.example.com")
	is := is.New(t)
	is.Equal(d.Answer([]byte{1, 2, 3}, nil), []byte(nil))
	q := query(t, "api.example.com.", dnsmessage.TypeA)
	resp := append([]byte(nil), q...)
	resp[2] |= 0x80 // QR
	is.Equal(d.Answer(resp, nil), []byte(nil))
	two := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 1})
	two.StartQuestions()
	for range 2 {
		two.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("api.example.com."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	}
	m, _ := two.Finish()
	rc, _, _ := parsed(t, d.Answer(m, nil))
	is.Equal(rc, dnsmessage.RCodeFormatError)
	ch := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 1})
	ch.StartQuestions()
	ch.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("api.example.com."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassCHAOS})
	m, _ = ch.Finish()
	rc, _, _ = parsed(t, d.Answer(m, nil))
	is.Equal(rc, dnsmessage.RCodeRefused)
	op := append([]byte(nil), q...)
	op[2] |= 2 << 3 // opcode STATUS
	rc, _, _ = parsed(t, d.Answer(op, nil))
	is.Equal(rc, dnsmessage.RCodeNotImplemented)
}

// FuzzDNSAnswer: any message gets no answer or one that parses, echoes
// the query's ID, and holds only synthetic addresses.
func FuzzDNSAnswer(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/dns/*.bin")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(query(f, "api.example.com.", dnsmessage.TypeA))
	f.Add(query(f, "x.svc.example.org.", dnsmessage.TypeAAAA))
	d := testDNS(f, 16, nil, "https://api.example.com", "https://*.svc.example.org")
	f.Fuzz(func(t *testing.T, q []byte) {
		r := d.Answer(q, nil)
		if r == nil {
			return
		}
		var m dnsmessage.Message
		if err := m.Unpack(r); err != nil {
			t.Fatalf("answer does not parse: %v", err)
		}
		if len(q) >= 2 && m.Header.ID != uint16(q[0])<<8|uint16(q[1]) {
			t.Fatal("answer's ID is not the query's")
		}
		for _, a := range m.Answers {
			ar, ok := a.Body.(*dnsmessage.AResource)
			if !ok || !SyntheticPrefix.Contains(netip.AddrFrom4(ar.A)) {
				t.Fatalf("answer holds %v", a.Body)
			}
		}
	})
}

// BenchmarkDNSAnswer measures one A answer for an allowed name, in
// process (the bridge's share of a lookup).
func BenchmarkDNSAnswer(b *testing.B) {
	d := testDNS(b, 0, nil, "https://api.example.com")
	q := query(b, "api.example.com.", dnsmessage.TypeA)
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		if d.Answer(q, buf) == nil {
			b.Fatal("no answer")
		}
	}
}
