//go:build linux

package main

import (
	"bufio"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
)

// wsServer is the upstream: a WebSocket server of Debian's
// python3-websockets over TLS. It accepts only the real key, first sends
// "offered:" and the Sec-WebSocket-Extensions it was offered, then
// answers each message: "leak" with the key, every character
// \\u-escaped; "leakraw" with "key=" and the key; anything else with
// "echo:" and the message.
const wsServer = `import asyncio, ssl, sys, websockets
cert, key, canary = sys.argv[1:4]
async def process_request(path, headers):
    if headers.get("Authorization") != "Bearer " + canary:
        return (401, [], b"bad key\n")
async def handler(ws, path):
    await ws.send("offered:" + ws.request_headers.get("Sec-WebSocket-Extensions", "none"))
    async for m in ws:
        if m == "leak":
            await ws.send("".join("\\u%04x" % ord(c) for c in canary))
        elif m == "leakraw":
            await ws.send("key=" + canary)
        else:
            await ws.send("echo:" + m)
async def main():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    async with websockets.serve(handler, "127.0.0.1", 0, ssl=ctx, process_request=process_request) as srv:
        print(srv.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()
asyncio.run(main())
`

// wsClient is the agent: python3-websockets (which offers
// permessage-deflate) through egressd's proxy — CONNECT by hand, since
// this version of the library has no proxy support — with the
// placeholder as its key. It prints the extensions it got, then what
// it receives for each message of its arguments, or "closed CODE".
const wsClient = `import asyncio, base64, socket, ssl, sys, websockets
proxy, inv, tok, url, ph, ca = sys.argv[1:7]
msgs = sys.argv[7:]
async def main():
    host, port = proxy.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    hostport = url.split("/")[2]
    auth = base64.b64encode((inv + ":" + tok).encode()).decode()
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n" % (hostport, hostport, auth)).encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    ctx = ssl.create_default_context(cafile=ca)
    async with websockets.connect(url, sock=s, ssl=ctx, server_hostname=hostport.split(":")[0],
                                  extra_headers={"Authorization": "Bearer " + ph}) as ws:
        print("extensions:" + ",".join(e.name for e in ws.extensions), flush=True)
        print(await ws.recv(), flush=True)
        for m in msgs:
            try:
                await ws.send(m)
                print(await ws.recv(), flush=True)
            except websockets.ConnectionClosed as e:
                print("closed %d" % e.code, flush=True)
                return
asyncio.run(main())
`

// newWSFixture starts the WebSocket upstream as ws.test and secretd and
// egressd in front of it, the credential's destination being ws.test.
func newWSFixture(t *testing.T) *llmFixture {
	t.Helper()
	ca := egresstest.NewCA(t)
	dir := t.TempDir()
	leaf := ca.Leaf(t, "ws.test")
	key, err := x509.MarshalPKCS8PrivateKey(leaf.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	var certPEM []byte
	for _, der := range leaf.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(python(t), "-c", wsServer, certFile, keyFile, canary)
	srv.Stderr = os.Stderr
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	port, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the WebSocket server did not start: %v", err)
	}
	f := &llmFixture{}
	f.setup(t, ca, startEgressd, "ws.test", strings.TrimSpace(port))
	return f
}

// python returns /usr/bin/python3 once it can import websockets (Debian
// python3-websockets; scripts/setup installs it).
func python(t *testing.T) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import websockets").Run(); err != nil {
		t.Fatalf("needs %s with websockets (scripts/setup installs python3-websockets): %v", py, err)
	}
	return py
}

// ws runs the client with msgs and returns its output lines.
func (f *llmFixture) ws(t *testing.T, msgs ...string) []string {
	t.Helper()
	args := append([]string{"-c", wsClient, f.info.ProxyAddress, "inv-s", f.tok, strings.Replace(f.url, "https:", "wss:", 1) + "/ws",
		f.ph, f.info.CABundlePath}, msgs...)
	out, err := exec.Command(python(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("websocket client: %v\n%s", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestWebSocketThroughInterception: a WebSocket client holding only the
// placeholder talks to the upstream through an intercepted tunnel: the
// handshake goes through the pipeline (the key substituted in its
// header; the server accepts only the real one), the client's
// permessage-deflate offer never reaches the upstream, and messages
// echo both ways. A client message that carries a held value or the
// client's own placeholder closes the connection with 1008; an upstream
// message that holds the key raw arrives scrubbed, and one that holds it
// in a form that cannot be removed in place closes the client with
// 1008, never the key.
func TestWebSocketThroughInterception(t *testing.T) {
	t.Parallel()
	f := newWSFixture(t)
	t.Run("cases", func(t *testing.T) { wsCases(t, f) })
	is := is.New(t)
	is.True(waitAudit(t, f.eg, `"ended_by":"policy"`))
	is.True(waitAudit(t, f.eg, `"ended_by":"echo"`))
	checkNoCanary(t, f.eg.auditLog(t)+f.eg.stderr.String())
}

// wsCases are TestWebSocketThroughInterception's exchanges, in parallel.
func wsCases(t *testing.T, f *llmFixture) {
	for _, tc := range []struct {
		name string
		msgs []string
		want []string
	}{
		{"echo", []string{"hello", "again"}, []string{"extensions:", "offered:none", "echo:hello", "echo:again"}},
		{"held value from the client", []string{"hello", "x" + canary}, []string{"extensions:", "offered:none", "echo:hello", "closed 1008"}},
		{"own placeholder from the client", []string{"key " + f.ph}, []string{"extensions:", "offered:none", "closed 1008"}},
		// A message goes whole, the scan goes on into the next: the one
		// that completes a value or a placeholder never leaves. (The
		// echo of the first ends with a prefix of the key, replaced at
		// the message's end.)
		{"held value split over two client messages", []string{"x" + canary[:9], canary[9:]}, []string{"extensions:", "offered:none", "echo:x[REDACTED]", "closed 1008"}},
		{"placeholder split over two client messages", []string{"key " + f.ph[:20], f.ph[20:]}, []string{"extensions:", "offered:none", "echo:key " + f.ph[:20], "closed 1008"}},
		{"raw key from the upstream", []string{"leakraw"}, []string{"extensions:", "offered:none", "key=[REDACTED]"}},
		{"escaped key from the upstream", []string{"leak"}, []string{"extensions:", "offered:none", "closed 1008"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got := f.ws(t, tc.msgs...)
			is.Equal(got, tc.want)
			checkNoCanary(t, strings.Join(got, "\n"))
		})
	}
}
