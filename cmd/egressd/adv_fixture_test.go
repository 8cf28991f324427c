//go:build linux

package main

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/cmd/egressd/internal/wsframe"
)

// advWS is an adversarial WebSocket upstream (adv.test, TLS, one
// handler per connection that checks the key, answers 101 and then runs
// script) with secretd and egressd in front of it.
type advWS struct {
	*llmFixture
	mu   sync.Mutex
	keys []string // the Authorization of each handshake that reached adv.test
}

func newAdvWS(t *testing.T, script func(c *wsPeer), args ...string) *advWS {
	t.Helper()
	return newAdvWSHead(t, "", script, args...)
}

// newAdvWSHead is newAdvWS whose 101 answers carry extra (header lines,
// each ending in CRLF).
func newAdvWSHead(t *testing.T, extra string, script func(c *wsPeer), args ...string) *advWS {
	t.Helper()
	ca := egresstest.NewCA(t)
	leaf := ca.Leaf(t, "adv.test")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{leaf}, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	a := &advWS{llmFixture: &llmFixture{ended: map[string]time.Time{}, auth: map[string]string{}}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				a.mu.Lock()
				a.keys = append(a.keys, req.Header.Get("Authorization"))
				a.mu.Unlock()
				if req.Header.Get("Authorization") != "Bearer "+canary {
					io.WriteString(c, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")
					return
				}
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "+
					wsAccept(req.Header.Get("Sec-WebSocket-Key"))+"\r\n"+extra+"\r\n")
				script(&wsPeer{c: c, br: br, server: true})
			}()
		}
	}()
	a.setup(t, ca, startEgressd, "adv.test", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), args...)
	return a
}

func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC11B65"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// wsPeer is one end of a WebSocket connection, frames by hand.
type wsPeer struct {
	c      net.Conn
	br     *bufio.Reader
	server bool
	head   string // the client's: the handshake answer's head
}

// send writes one frame (masked from a client).
func (p *wsPeer) send(fin bool, op byte, payload []byte) error {
	h := wsframe.Header{Fin: fin, Opcode: op, Length: int64(len(payload)), Masked: !p.server, Mask: [4]byte{1, 2, 3, 4}}
	b := wsframe.AppendHeader(nil, h)
	q := append([]byte(nil), payload...)
	if h.Masked {
		wsframe.MaskBytes(h.Mask, 0, q)
	}
	_, err := p.c.Write(append(b, q...))
	return err
}

// recv reads one frame and returns its header and payload.
func (p *wsPeer) recv() (wsframe.Header, []byte, error) {
	h, err := wsframe.ReadHeader(p.br, 1<<24)
	if err != nil {
		return h, nil, err
	}
	b := make([]byte, h.Length)
	if _, err := io.ReadFull(p.br, b); err != nil {
		return h, nil, err
	}
	if h.Masked {
		wsframe.MaskBytes(h.Mask, 0, b)
	}
	return h, b, nil
}

// recvAll reads frames until the connection ends or d passes and returns
// every payload concatenated, with the close code if one came (0: none).
func (p *wsPeer) recvAll(d time.Duration) (string, uint16) {
	p.c.SetReadDeadline(time.Now().Add(d))
	var b strings.Builder
	for {
		h, payload, err := p.recv()
		if err != nil {
			return b.String(), 0
		}
		if h.Opcode == wsframe.OpClose {
			if len(payload) >= 2 {
				return b.String(), uint16(payload[0])<<8 | uint16(payload[1])
			}
			return b.String(), 1005
		}
		b.Write(payload)
	}
}

// dialWS connects as inv-s through egressd's proxy (CONNECT, TLS with
// egressd's CA) and performs the handshake to path with the placeholder
// as the key.
func (a *advWS) dialWS(t *testing.T, path string) *wsPeer {
	t.Helper()
	host := strings.TrimPrefix(a.url, "https://")
	c, err := net.Dial("tcp", a.info.ProxyAddress)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	auth := base64.StdEncoding.EncodeToString([]byte("inv-s:" + a.tok))
	io.WriteString(c, "CONNECT "+host+" HTTP/1.1\r\nHost: "+host+"\r\nProxy-Authorization: Basic "+auth+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(c, &tls.Config{RootCAs: a.roots(t), ServerName: "adv.test", NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(tc, "GET "+path+" HTTP/1.1\r\nHost: "+host+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer "+a.ph+"\r\n\r\n")
	tbr := bufio.NewReader(tc)
	var head strings.Builder
	for {
		line, err := tbr.ReadString('\n')
		if err != nil {
			t.Fatalf("handshake answer: %v %q", err, head.String())
		}
		head.WriteString(line)
		if line == "\r\n" {
			break
		}
	}
	if !strings.HasPrefix(head.String(), "HTTP/1.1 101") {
		t.Fatalf("handshake answer: %q", head.String())
	}
	return &wsPeer{c: tc, br: tbr, head: head.String()}
}

// recvMessage reads frames until one data message is whole (control
// frames skipped) and returns it with its first opcode.
func (p *wsPeer) recvMessage(t *testing.T) (string, byte) {
	t.Helper()
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	var op byte
	for {
		h, payload, err := p.recv()
		if err != nil {
			t.Fatalf("recv: %v (so far %q)", err, b.String())
		}
		if h.IsControl() {
			continue
		}
		if op == 0 {
			op = h.Opcode
		}
		b.Write(payload)
		if h.Fin {
			return b.String(), op
		}
	}
}

// h2Dial opens an intercepted tunnel to f's upstream as inv-s and speaks
// HTTP/2 in it by hand: the preface and an empty SETTINGS are sent.
func (f *llmFixture) h2Dial(t *testing.T) (*http2.Framer, string) {
	t.Helper()
	host := strings.TrimPrefix(f.url, "https://")
	c, err := net.Dial("tcp", f.info.ProxyAddress)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	auth := base64.StdEncoding.EncodeToString([]byte("inv-s:" + f.tok))
	io.WriteString(c, "CONNECT "+host+" HTTP/1.1\r\nHost: "+host+"\r\nProxy-Authorization: Basic "+auth+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(c, &tls.Config{RootCAs: f.roots(t), ServerName: strings.Split(host, ":")[0], NextProtos: []string{"h2"}})
	if err := tc.Handshake(); err != nil || tc.ConnectionState().NegotiatedProtocol != "h2" {
		t.Fatalf("TLS: %v %q", err, tc.ConnectionState().NegotiatedProtocol)
	}
	io.WriteString(tc, http2.ClientPreface)
	fr := http2.NewFramer(tc, tc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return fr, host
}

// h2Headers sends a HEADERS frame of fields (name, value pairs in order)
// on stream id.
func h2Headers(t *testing.T, fr *http2.Framer, id uint32, endStream bool, fields ...string) {
	t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i := 0; i+1 < len(fields); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: endStream, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// h2Outcome reads frames until stream id gets its response header (its
// :status) or is reset ("rst:" and the code), or the connection ends
// ("goaway"/"eof"), within d.
func h2Outcome(t *testing.T, fr *http2.Framer, id uint32, d time.Duration) string {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		fm, err := fr.ReadFrame()
		if err != nil {
			return "eof"
		}
		switch fm := fm.(type) {
		case *http2.SettingsFrame:
			if !fm.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if fm.StreamID == id {
				return fm.PseudoValue("status")
			}
		case *http2.RSTStreamFrame:
			if fm.StreamID == id {
				return "rst:" + fm.ErrCode.String()
			}
		case *http2.GoAwayFrame:
			return "goaway:" + fm.ErrCode.String()
		}
	}
	return "timeout"
}

// newAdvHTTP is secretd and egressd in front of h, an HTTPS upstream
// (llm.test) whose credential is inv-s's key.
func newAdvHTTP(t *testing.T, h http.HandlerFunc, args ...string) *llmFixture {
	t.Helper()
	ca := egresstest.NewCA(t)
	f := &llmFixture{ended: map[string]time.Time{}, auth: map[string]string{}}
	srv := ca.TLSServer(t, h, "llm.test")
	srv.EnableHTTP2 = true
	f.setup(t, ca, startEgressd, "llm.test", strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port), args...)
	return f
}

// h2client is f.client speaking HTTP/2 inside the tunnel.
func (f *llmFixture) h2client(t *testing.T) *http.Client {
	t.Helper()
	c := f.client(t)
	c.Transport.(*http.Transport).ForceAttemptHTTP2 = true
	return c
}
