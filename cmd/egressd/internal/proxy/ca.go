package proxy

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// File names in egressd's state directory.
const (
	CAKeyFile  = "proxy-ca.key" // PKCS#8 PEM, 0600
	CACertFile = "proxy-ca.pem" // PEM, 0644
)

// Leaf certificate lifetimes.
const (
	LeafLifetime = 24 * time.Hour // a leaf's validity (NotBefore is an hour earlier)
	leafRenew    = time.Hour      // a cached leaf this close to expiry is reissued
	maxLeaves    = 4096           // cached leaves; the cache is cleared when full
	caLifetime   = 10 * 365 * 24 * time.Hour
)

// CA is egressd's local interception CA: an ECDSA P-256 key and a
// self-signed certificate kept in the state directory, and a cache of
// short-lived leaf certificates it issued.
type CA struct {
	Cert *x509.Certificate // the CA's self-signed certificate
	PEM  []byte            // the certificate, PEM
	key  *ecdsa.PrivateKey

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// LoadOrCreateCA loads the CA from dir (created 0700 when missing), or
// generates one on first start: the key is written 0600 (O_EXCL), the
// certificate 0644. An expired or unreadable CA is an error, never
// silently replaced.
func LoadOrCreateCA(dir string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("proxy.LoadOrCreateCA: %w", err)
	}
	keyPath, certPath := filepath.Join(dir, CAKeyFile), filepath.Join(dir, CACertFile)
	keyPEM, err := os.ReadFile(keyPath)
	if errors.Is(err, os.ErrNotExist) {
		return createCA(keyPath, certPath)
	}
	if err != nil {
		return nil, fmt.Errorf("proxy.LoadOrCreateCA: %w", err)
	}
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("proxy.LoadOrCreateCA: %s must not be readable by group or others", keyPath)
	}
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("proxy.LoadOrCreateCA: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	cb, _ := pem.Decode(certPEM)
	if kb == nil || cb == nil {
		return nil, fmt.Errorf("proxy.LoadOrCreateCA: %s or %s is not PEM", keyPath, certPath)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("proxy.LoadOrCreateCA: key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	cert, err := x509.ParseCertificate(cb.Bytes)
	if !ok || err != nil || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("proxy.LoadOrCreateCA: %s does not match %s", keyPath, certPath)
	}
	if time.Now().After(cert.NotAfter) {
		return nil, fmt.Errorf("proxy.LoadOrCreateCA: the CA expired at %s; remove %s and %s to make a new one", cert.NotAfter, keyPath, certPath)
	}
	return &CA{Cert: cert, PEM: certPEM, key: key, leaves: map[string]*tls.Certificate{}}, nil
}

func createCA(keyPath, certPath string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "hostkit egressd local CA", Organization: []string{"hostkit"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caLifetime),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(keyPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("proxy.LoadOrCreateCA: %w", err)
	}
	_, err = f.Write(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(keyPath)
		return nil, fmt.Errorf("proxy.LoadOrCreateCA: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writePublic(certPath, certPEM); err != nil {
		return nil, err
	}
	return &CA{Cert: cert, PEM: certPEM, key: key, leaves: map[string]*tls.Certificate{}}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n.Add(n, big.NewInt(1))
}

// Leaf returns a certificate for host (a canonical host: a name, or an IP
// literal, IPv6 in brackets) issued by the CA, from the cache while it has
// more than an hour left.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	now := time.Now()
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c := ca.leaves[host]; c != nil && now.Add(leafRenew).Before(c.Leaf.NotAfter) {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(LeafLifetime),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if a, err := netip.ParseAddr(trimBrackets(host)); err == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, a.AsSlice())
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("proxy.Leaf: %w", err)
	}
	leaf, _ := x509.ParseCertificate(der)
	c := &tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key, Leaf: leaf}
	if len(ca.leaves) >= maxLeaves {
		clear(ca.leaves)
	}
	ca.leaves[host] = c
	return c, nil
}

func trimBrackets(h string) string {
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}

// systemRootFiles are where Linux distributions and macOS keep the system
// roots as one PEM file (as crypto/x509 looks for them).
var systemRootFiles = []string{
	"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/cert.pem",
}

// WriteBundle writes the public CA bundle to path: the system roots (the
// first readable file of the usual locations), the operator's extra CAs
// (extra, PEM; may be nil) and the CA, mode 0644 set explicitly, replaced
// atomically. It reports whether system roots were found.
func (ca *CA) WriteBundle(path string, extra []byte) (bool, error) {
	var b bytes.Buffer
	found := false
	for _, f := range systemRootFiles {
		if pemBytes, err := os.ReadFile(f); err == nil && len(pemBytes) > 0 {
			b.Write(pemBytes)
			found = true
			break
		}
	}
	if len(extra) > 0 {
		b.WriteString("\n")
		b.Write(extra)
	}
	b.WriteString("\n# hostkit egressd local CA\n")
	b.Write(ca.PEM)
	return found, writePublic(path, b.Bytes())
}

// writePublic writes data to path with mode 0644 (set explicitly,
// whatever the umask) through a temporary file and a rename.
func writePublic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("proxy: write %s: %w", path, err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("proxy: write %s: %w", path, err)
	}
	return nil
}
