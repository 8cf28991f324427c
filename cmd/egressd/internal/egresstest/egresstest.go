// Package egresstest holds helpers for egressd's tests: a test CA and TLS
// servers that use it, and a loopback listener run under another UID. It
// is imported by tests only.
package egresstest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"hostkit.dev/lib/api/secretdapi"
)

// CA is a throwaway certificate authority.
type CA struct {
	Cert *x509.Certificate // the self-signed CA certificate
	Key  *ecdsa.PrivateKey // its private key
	Pool *x509.CertPool    // a pool holding only Cert
	PEM  []byte            // Cert, PEM-encoded
}

// NewCA creates a CA valid for an hour.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egressd test CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Key: key, Pool: pool, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// WriteFile writes the CA certificate as PEM into dir and returns the path.
func (ca *CA) WriteFile(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(p, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Leaf issues a server certificate for names.
func (ca *CA) Leaf(t testing.TB, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TLSServer starts an HTTPS (HTTP/1.1 and HTTP/2) server on 127.0.0.1 with
// a certificate from ca for names; it is closed at the end of the test.
func (ca *CA) TLSServer(t testing.TB, h http.Handler, names ...string) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.EnableHTTP2 = true
	s.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, names...)}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// AgentListener runs `python3 -m http.server` on 127.0.0.1 under uid (an
// agent UID) and returns its port once it listens. The test is skipped
// when it cannot run: not root, or no /usr/bin/python3.
func AgentListener(t testing.TB, uid uint32) int {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a listener under another UID")
	}
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("needs " + py)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(py, "-m", "http.server", "--bind", "127.0.0.1", strconv.Itoa(port))
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			c.Close()
			return port
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("agent listener did not start")
	return 0
}

// Consumer is an in-process secretd lease consumer that hands out fixed
// leases: the i-th handle of a consume gets Leases[i] (a copy, its Value
// copied too), with that handle. Unit tests and in-process benchmarks use
// it to build bundles; egressd's integration tests consume from the real
// secretd.
type Consumer struct {
	Leases []secretdapi.Lease // by position: the i-th handle gets Leases[i], with that handle and a copy of its value
	// Placeholders overrides the placeholder answered for a handle (the
	// map's key is the handle's bytes): secretd's placeholders are
	// unique per lease, and egressd refuses a bundle whose placeholder
	// another invocation's bundle holds.
	Placeholders map[string]string
}

// LeaseConsume answers handles with c.Leases, in order, each with its
// handle's placeholder from c.Placeholders if there is one; it never
// fails.
func (c *Consumer) LeaseConsume(_ context.Context, _ string, handles [][]byte) (*secretdapi.LeaseConsumeResponse, error) {
	out := &secretdapi.LeaseConsumeResponse{}
	for i, h := range handles {
		l := c.Leases[i]
		l.Handle, l.Value = h, append([]byte(nil), l.Value...)
		if ph, ok := c.Placeholders[string(h)]; ok {
			l.Placeholder = ph
		}
		out.Leases = append(out.Leases, l)
	}
	return out, nil
}
