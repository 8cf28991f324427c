package main

import (
	"bufio"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
)

// upstreams are the loopback servers every mode talks to: plain HTTP for
// (a), HTTPS on 127.0.0.1 for (b) and HTTPS on (c)'s address for (c), all
// with one test CA. They run in a child process of their own (this binary
// with -serve-upstreams) unless -upstream-in-process: a client and a
// server that share one Go runtime hand each other work without a
// cross-process wakeup, which no real client and server (nor wrk in (a))
// get, and which favours the direct modes of (b) and (c).
type upstreams struct {
	plain, tls, c string // host:port of each server
	pem           []byte // the test CA, PEM
	pool          *x509.CertPool
	cmd           *exec.Cmd // nil when the servers run in this process
	stdin         io.Closer
}

// pid returns the servers' process: the child, or this process.
func (u *upstreams) pid() int {
	if u.cmd == nil {
		return os.Getpid()
	}
	return u.cmd.Process.Pid
}

// stop ends the child (it exits when its stdin closes).
func (u *upstreams) stop() {
	if u.cmd != nil {
		u.stdin.Close()
		_ = u.cmd.Wait()
	}
}

// startUpstreams starts the servers, in a child process unless inProcess,
// and writes the CA's PEM to caFile.
func startUpstreams(caFile string, inProcess bool, bigMB int, cIP string) (*upstreams, error) {
	u := &upstreams{}
	if inProcess {
		var err error
		if u.plain, u.tls, u.c, err = serveUpstreams(caFile, bigMB, cIP); err != nil {
			return nil, err
		}
	} else {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		u.cmd = exec.Command(self, "-serve-upstreams", caFile, "-big", fmt.Sprint(bigMB), "-c-ip", cIP)
		u.cmd.Stderr = os.Stderr
		in, err := u.cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		out, err := u.cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := u.cmd.Start(); err != nil {
			return nil, err
		}
		u.stdin = in
		line, err := bufio.NewReader(out).ReadString('\n')
		f := strings.Fields(line)
		if err != nil || len(f) != 3 {
			u.stop()
			return nil, fmt.Errorf("upstream process: %q: %v", line, err)
		}
		u.plain, u.tls, u.c = f[0], f[1], f[2]
	}
	var err error
	if u.pem, err = os.ReadFile(caFile); err != nil {
		u.stop()
		return nil, err
	}
	u.pool = x509.NewCertPool()
	if !u.pool.AppendCertsFromPEM(u.pem) {
		u.stop()
		return nil, errors.New("upstream CA: no certificate in " + caFile)
	}
	return u, nil
}

// childUpstreams is the -serve-upstreams process: it serves, prints the
// three addresses on one line, and exits when its stdin closes.
func childUpstreams(caFile string, bigMB int, cIP string) error {
	plain, tlsUp, c, err := serveUpstreams(caFile, bigMB, cIP)
	if err != nil {
		return err
	}
	fmt.Println(plain, tlsUp, c)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// serveUpstreams starts the three servers in this process: a 64-byte
// answer over plain HTTP; over HTTPS, /big (bigMB MiB) and, to requests
// that carry the real credential (401 otherwise), the streams of
// streamHandler or a 64-byte answer.
func serveUpstreams(caFile string, bigMB int, cIP string) (plain, tlsUp, c string, err error) {
	body := make([]byte, 64)
	if plain, err = serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) })); err != nil {
		return
	}
	ca := newCA()
	if err = os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		return
	}
	big := make([]byte, 1<<20)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", fmt.Sprint(bigMB<<20))
			for range bigMB {
				w.Write(big)
			}
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "bad auth", http.StatusUnauthorized)
			return
		}
		if !streamHandler(w, r) {
			w.Write(body)
		}
	})
	if tlsUp, err = serveTLS(ca, "127.0.0.1:0", handler); err != nil {
		return
	}
	// (c)'s upstream listens on a non-loopback local address, reached as
	// up.test through egressd's host map, like a real credential
	// destination (no loopback owner check), unless -c-ip says otherwise.
	c, err = serveTLS(ca, net.JoinHostPort(cIP, "0"), handler)
	return
}
