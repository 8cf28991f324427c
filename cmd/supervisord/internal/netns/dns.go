package netns

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/time/rate"
	"hostkit.dev/lib/netguard"
)

// DNS answers an isolated instance's name queries on 127.0.0.1:53 inside
// its namespace (UDP and TCP, RFC 1035 section 4.2) from the instance's
// policy alone, and never asks anyone else: a name reaches a real
// resolver (egressd's) only when the agent connects to it and egressd's
// policy allows it, so a query carrying data in its labels goes nowhere.
//
// An A query for a name some allowed origin covers gets that name's
// synthetic address (Names) with TTL SyntheticTTL; any other type for it
// (AAAA, HTTPS, SVCB, ...) gets NODATA, so clients use the one IPv4
// address. A name no origin covers is REFUSED, and so is one past the
// table's limit. Every refusal is counted in Refusals (by reason and the
// name's Shape, which supervisord audits) and logged as
// "netns.dns_refused" (the holder's decision line, rate-limited by
// RefusalRate with a suppressed count); neither holds a label the
// policy does not name.
type DNS struct {
	names    *Names
	allow    []netguard.Pattern
	known    map[string]bool // KnownSuffixes(allow)
	log      *slog.Logger
	limit    *rate.Limiter
	dropped  atomic.Uint64 // refusals not logged since the last line
	refusals Refusals
}

// SyntheticTTL is the TTL of a synthetic A record, in seconds.
const SyntheticTTL = 60

// RefusalRate and RefusalBurst bound the refusal lines a DNS writes
// (per second, bucket size): a looping agent must not fill the log.
const (
	RefusalRate  = 5
	RefusalBurst = 20
)

// maxTCPQuery bounds a DNS message over TCP (its 2-byte length allows
// 65535; a query is one question).
const maxTCPQuery = 4096

// NewDNS returns a resolver answering for the names allow covers
// (netguard.Pattern.MatchHost; see Resolvable), giving addresses from
// names.
func NewDNS(names *Names, allow []netguard.Pattern, log *slog.Logger) *DNS {
	return &DNS{names: names, allow: allow, known: KnownSuffixes(allow), log: log, limit: rate.NewLimiter(RefusalRate, RefusalBurst)}
}

// Refusals returns the resolver's refusal counts.
func (d *DNS) Refusals() *Refusals { return &d.refusals }

// Allowed reports whether some allowed origin covers host (canonical).
func (d *DNS) Allowed(host string) bool {
	for _, p := range d.allow {
		if p.MatchHost(host) {
			return true
		}
	}
	return false
}

// Answer returns the response to the DNS message q, or nil when q gets
// none (shorter than a header, or itself a response). buf, when large
// enough, holds the answer.
func (d *DNS) Answer(q, buf []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil || h.Response {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired}
	if h.OpCode != 0 {
		rh.RCode = dnsmessage.RCodeNotImplemented
		return reply(buf, rh, nil, nil)
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		rh.RCode = dnsmessage.RCodeFormatError
		return reply(buf, rh, nil, nil)
	}
	question := qs[0]
	name := strings.TrimSuffix(question.Name.String(), ".")
	host, err := netguard.CanonicalHost(name)
	switch {
	case question.Class != dnsmessage.ClassINET:
		rh.RCode = dnsmessage.RCodeRefused
		d.refused(RefusedClass, name)
		return reply(buf, rh, &question, nil)
	case err != nil || host != strings.ToLower(name) || !d.Allowed(host):
		rh.RCode = dnsmessage.RCodeRefused
		d.refused(RefusedPolicy, name)
		return reply(buf, rh, &question, nil)
	}
	rh.Authoritative = true
	if question.Type != dnsmessage.TypeA {
		return reply(buf, rh, &question, nil) // NODATA
	}
	a, err := d.names.Assign(host)
	if err != nil {
		rh.RCode, rh.Authoritative = dnsmessage.RCodeRefused, false
		d.refused(RefusedExhausted, host)
		return reply(buf, rh, &question, nil)
	}
	ip := a.As4()
	return reply(buf, rh, &question, &ip)
}

// reply builds a response: the question echoed when known, and one A
// record for it when a is set.
func reply(buf []byte, h dnsmessage.Header, q *dnsmessage.Question, a *[4]byte) []byte {
	b := dnsmessage.NewBuilder(buf[:0], h)
	b.EnableCompression()
	if q == nil {
		out, _ := b.Finish()
		return out
	}
	_ = b.StartQuestions()
	if err := b.Question(*q); err != nil {
		// A name the builder will not write back (it parsed, but e.g. is
		// not absolute): answer without the question.
		b = dnsmessage.NewBuilder(buf[:0], h)
		out, _ := b.Finish()
		return out
	}
	if a != nil {
		_ = b.StartAnswers()
		_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: SyntheticTTL},
			dnsmessage.AResource{A: *a})
	}
	out, _ := b.Finish()
	return out
}

// refused counts a refusal and writes its decision line, when the rate
// allows. The name appears only as its Shape and length: a query's
// labels may carry data the agent meant to send out.
func (d *DNS) refused(reason, name string) {
	shape := Shape(name, d.known)
	d.refusals.add(reason, shape)
	if !d.limit.Allow() {
		d.dropped.Add(1)
		return
	}
	attrs := []any{slog.String("reason", reason), slog.String("shape", shape), slog.Int("name_len", len(name))}
	if n := d.dropped.Swap(0); n > 0 {
		attrs = append(attrs, slog.Uint64("suppressed", n))
	}
	d.log.Warn("netns.dns_refused", attrs...)
}

// ServeUDP answers queries on pc until ctx ends or pc fails.
func (d *DNS) ServeUDP(ctx context.Context, pc net.PacketConn) error {
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	in, out := make([]byte, 65535), make([]byte, 0, 512)
	for {
		n, from, err := pc.ReadFrom(in)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if r := d.Answer(in[:n], out); r != nil {
			_, _ = pc.WriteTo(r, from)
		}
	}
}

// tcpIdle bounds how long a TCP client may hold a connection between
// queries.
const tcpIdle = 10 * time.Second

// ServeTCP answers length-prefixed queries (RFC 1035 section 4.2.2) on
// each connection l accepts, at most MaxConns at once, until ctx ends.
func (d *DNS) ServeTCP(ctx context.Context, l net.Listener) error {
	return serveConns(ctx, l, func(c net.Conn, _ func(net.Conn) func()) { d.serveConn(c) })
}

func (d *DNS) serveConn(c net.Conn) {
	defer c.Close()
	var lb [2]byte
	q := make([]byte, maxTCPQuery)
	out := make([]byte, 2, 514)
	for {
		_ = c.SetDeadline(time.Now().Add(tcpIdle))
		if _, err := io.ReadFull(c, lb[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(lb[:]))
		if n > maxTCPQuery {
			return
		}
		if _, err := io.ReadFull(c, q[:n]); err != nil {
			return
		}
		r := d.Answer(q[:n], out[2:])
		if r == nil {
			return
		}
		msg := append(binary.BigEndian.AppendUint16(out[:0], uint16(len(r))), r...)
		if _, err := c.Write(msg); err != nil {
			return
		}
	}
}
