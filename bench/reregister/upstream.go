package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// value is the credential's raw value: the upstream checks it arrives.
const value = "bench-reregister-value-7f3a9c"

// upstream is an HTTPS server for api.test on 127.0.0.1 that answers 200
// only to the real value, with its CA in caFile (given to egressd).
type upstream struct {
	srv     *http.Server
	origin  string // https://api.test:PORT
	resolve string // egressd's -resolve entry
	caFile  string
}

func startUpstream(root string) (*upstream, error) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caT, caT, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafT := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "api.test"}, DNSNames: []string{"api.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leaf, err := x509.CreateCertificate(rand.Reader, leafT, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	u := &upstream{caFile: filepath.Join(root, "bench-ca.pem")}
	if err := os.WriteFile(u.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	u.origin, u.resolve = "https://api.test:"+port, "api.test:"+port+":127.0.0.1"
	u.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+value {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "ok")
	}), TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leaf}, PrivateKey: key}}}}
	go u.srv.ServeTLS(l, "", "")
	return u, nil
}

func (u *upstream) close() { u.srv.Close() }

// agent does what an instance's agent does: requests through egressd's
// proxy with the proxy URL and placeholder from its agent.env.
type agent struct {
	id     string
	ph     string
	client *http.Client
	origin string
}

func newAgent(root, id string, up *upstream) (*agent, error) {
	b, err := os.ReadFile(filepath.Join(root, "state", "supervisord", "instances", id, "agent.env"))
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	proxy, err := url.Parse(env["HTTPS_PROXY"])
	if err != nil || env["API_TOKEN"] == "" {
		return nil, fmt.Errorf("instance %s: no proxy or placeholder in agent.env", id)
	}
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(env["SSL_CERT_FILE"])
	if err != nil {
		return nil, err
	}
	pool.AppendCertsFromPEM(caPEM)
	tr := &http.Transport{Proxy: http.ProxyURL(proxy), TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}
	return &agent{id: id, ph: env["API_TOKEN"], origin: up.origin, client: &http.Client{Transport: tr, Timeout: 5 * time.Second}}, nil
}

// tryUntil sends requests (each on a new connection, 100 ms apart, as an
// agent's retry loop might) until one gets 200 or deadline passes.
func (a *agent) tryUntil(deadline time.Time) error {
	last := ""
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest("GET", a.origin+"/", nil)
		req.Header.Set("Authorization", "Bearer "+a.ph)
		resp, err := a.client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status + " " + resp.Header.Get("X-Hostkit-Error")
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("instance %s: not working before the deadline (last: %s)", a.id, last)
}
