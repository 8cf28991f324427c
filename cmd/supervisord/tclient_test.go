//go:build linux

package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	be "encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// tclientEnv, when set, makes the test binary the agent of
// TestTransparentEgressStreams: a Go program that ignores the proxy
// variables (no Proxy, its own resolver over TCP to the namespace's
// 127.0.0.1:53) and prints one "<case> <outcome>" line per step. Its
// value is the upstream's port; the placeholder is in API_TOKEN.
const tclientEnv = "HK_TCLIENT_PORT"

// tclientDeniedEnv holds a name whose labels carry data: it must be
// refused and never appear in a log or the audit trail.
const tclientDeniedEnv = "HK_TCLIENT_DENIED"

func tclientMain() int {
	port, tok := os.Getenv(tclientEnv), os.Getenv("API_TOKEN")
	say := func(f string, a ...any) { fmt.Printf(f+"\n", a...) }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	rc, addr, err := dnsTCP("stream.test")
	say("dns-tcp-allowed rcode=%d addr=%s err=%v", rc, addr, err)
	rc, _, err = dnsTCP(os.Getenv(tclientDeniedEnv))
	say("dns-tcp-denied rcode=%d err=%v", rc, err)

	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", "127.0.0.1:53") // DNS over TCP only
	}}
	d := &net.Dialer{Resolver: res, Timeout: 20 * time.Second}
	base := "https://stream.test:" + port
	get := func(proto, path string) (*http.Response, error) {
		tr := &http.Transport{Proxy: nil, DialContext: d.DialContext, ForceAttemptHTTP2: proto == "h2",
			TLSClientConfig: &tls.Config{NextProtos: []string{proto}}}
		if proto != "h2" {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		return (&http.Client{Transport: tr}).Do(req)
	}

	if resp, err := get("h2", "/h2"); err != nil {
		say("h2 error=%v", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		say("h2 proto=%s status=%d body=%s", resp.Proto, resp.StatusCode, strings.TrimSpace(string(b)))
	}

	if resp, err := get("http/1.1", "/sse"); err != nil {
		say("sse error=%v", err)
	} else {
		say("sse status=%d type=%s", resp.StatusCode, resp.Header.Get("Content-Type"))
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				say("sse event=%s", v) // printed as it arrives: the test waits for the first
			}
		}
		resp.Body.Close()
		say("sse end err=%v", sc.Err())
	}

	echo, err := wsEcho(ctx, d, "stream.test:"+port, tok, "hello through the bridge")
	say("ws echo=%q err=%v", echo, err)
	say("done")
	return 0
}

// dnsTCP asks 127.0.0.1:53 over TCP (RFC 1035 section 4.2.2) for name's
// A record.
func dnsTCP(name string) (dnsmessage.RCode, string, error) {
	c, err := net.DialTimeout("tcp", "127.0.0.1:53", 10*time.Second)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
	b.StartQuestions()
	n, err := dnsmessage.NewName(name + ".")
	if err != nil {
		return 0, "", err
	}
	b.Question(dnsmessage.Question{Name: n, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, _ := b.Finish()
	if _, err := c.Write(append(be.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
		return 0, "", err
	}
	var lb [2]byte
	if _, err := io.ReadFull(c, lb[:]); err != nil {
		return 0, "", err
	}
	r := make([]byte, be.BigEndian.Uint16(lb[:]))
	if _, err := io.ReadFull(c, r); err != nil {
		return 0, "", err
	}
	var m dnsmessage.Message
	if err := m.Unpack(r); err != nil {
		return 0, "", err
	}
	for _, a := range m.Answers {
		if ar, ok := a.Body.(*dnsmessage.AResource); ok {
			return m.Header.RCode, net.IP(ar.A[:]).String(), nil
		}
	}
	return m.Header.RCode, "", nil
}

// wsAccept is Sec-WebSocket-Accept for key (RFC 6455 section 4.2.2).
func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// wsEcho opens a WebSocket (RFC 6455) to authority over TLS, sends msg
// in one masked text frame and returns the payload of the first frame
// that comes back.
func wsEcho(ctx context.Context, d *net.Dialer, authority, tok, msg string) (string, error) {
	raw, err := d.DialContext(ctx, "tcp", authority)
	if err != nil {
		return "", err
	}
	host, _, _ := net.SplitHostPort(authority)
	c := tls.Client(raw, &tls.Config{ServerName: host, NextProtos: []string{"http/1.1"}})
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	var kb [16]byte
	rand.Read(kb[:])
	key := base64.StdEncoding.EncodeToString(kb[:])
	fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"+
		"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n", authority, key, tok)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != wsAccept(key) {
		return "", fmt.Errorf("handshake: status %d", resp.StatusCode)
	}
	if _, err := c.Write(wsFrame([]byte(msg), true)); err != nil {
		return "", err
	}
	p, err := wsRead(br)
	return string(p), err
}

// wsFrame is one final text frame carrying p, masked when mask (a
// client's frames are, a server's are not).
func wsFrame(p []byte, mask bool) []byte {
	f := []byte{0x81}
	m := byte(0)
	if mask {
		m = 0x80
	}
	switch {
	case len(p) < 126:
		f = append(f, m|byte(len(p)))
	default:
		f = be.BigEndian.AppendUint16(append(f, m|126), uint16(len(p))) // payloads here stay < 64 KiB
	}
	if !mask {
		return append(f, p...)
	}
	var k [4]byte
	rand.Read(k[:])
	f = append(f, k[:]...)
	for i, b := range p {
		f = append(f, b^k[i%4])
	}
	return f
}

// wsRead reads one frame (of at most 64 KiB) and returns its unmasked
// payload.
func wsRead(r io.Reader) ([]byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := int(h[1] & 0x7f)
	if n == 126 {
		var l [2]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return nil, err
		}
		n = int(be.BigEndian.Uint16(l[:]))
	} else if n == 127 {
		return nil, fmt.Errorf("frame too large")
	}
	var k [4]byte
	if h[1]&0x80 != 0 {
		if _, err := io.ReadFull(r, k[:]); err != nil {
			return nil, err
		}
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, err
	}
	if h[1]&0x80 != 0 {
		for i := range p {
			p[i] ^= k[i%4]
		}
	}
	return p, nil
}
