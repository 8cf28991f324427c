package demo

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Host names of the two local servers; egressd maps them to 127.0.0.1
// with -resolve.
const (
	apiHost   = "api.demo.test"
	otherHost = "other.demo.test"
)

// throwawayCA is the local servers' CA. egressd trusts it through
// -ca-file; nothing else does.
type throwawayCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA() (*throwawayCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "hostkit demo throwaway CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &throwawayCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

// leaf issues a server certificate for host.
func (ca *throwawayCA) leaf(host string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// seen is one request a local server received. It holds what arrived,
// raw: the demo compares it and prints only whether it matched.
type seen struct {
	method, path, authorization string
	raw                         []byte // headers and body, for the exfiltration check
}

// server is a local HTTPS server on 127.0.0.1 that records every request.
type server struct {
	host   string
	port   int
	srv    *http.Server
	mu     sync.Mutex
	got    []seen
	served chan error
}

// origin is the server's canonical origin, https://host:port.
func (s *server) origin() string { return "https://" + s.host + ":" + strconv.Itoa(s.port) }

// requests returns a copy of what the server received.
func (s *server) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.got...)
}

// startServer serves host on a free loopback port with a leaf from ca.
// answer decides each response from what was recorded; stream, when set,
// answers streamPath instead (it is recorded too).
func startServer(ca *throwawayCA, host string, answer func(seen) (int, string), stream http.HandlerFunc) (*server, error) {
	cert, err := ca.leaf(host)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{host: host, port: ln.Addr().(*net.TCPAddr).Port, served: make(chan error, 1)}
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			var raw []byte
			for k, vs := range r.Header {
				for _, v := range vs {
					raw = append(raw, k+": "+v+"\n"...)
				}
			}
			rec := seen{method: r.Method, path: r.URL.RequestURI(), authorization: r.Header.Get("Authorization"),
				raw: append(append(raw, r.URL.RequestURI()+"\n"...), body...)}
			s.mu.Lock()
			s.got = append(s.got, rec)
			s.mu.Unlock()
			if stream != nil && r.URL.Path == streamPath {
				stream(w, r)
				return
			}
			code, text := answer(rec)
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(code)
			io.WriteString(w, text+"\n")
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { s.served <- s.srv.ServeTLS(ln, "", "") }()
	return s, nil
}

// close stops the server and waits for it.
func (s *server) close() {
	s.srv.Close()
	<-s.served // http.ErrServerClosed
}

// apiAnswer is the demo API: 200 only to `Bearer <token>`.
func apiAnswer(token []byte) func(seen) (int, string) {
	want := append([]byte("Bearer "), token...)
	return func(r seen) (int, string) {
		if subtle.ConstantTimeCompare([]byte(r.authorization), want) == 1 {
			return http.StatusOK, "welcome: the token matched"
		}
		return http.StatusUnauthorized, "unauthorized"
	}
}

// streamPath is the demo API's streaming endpoint: server-sent events.
const streamPath = "/v1/stream"

// Events the demo API streams, and the time between them.
const (
	streamEvents = 4
	streamGap    = 700 * time.Millisecond
)

// apiStream is the demo API's stream, as an LLM API answers: to `Bearer
// <token>` only, streamEvents server-sent events streamGap apart, each
// carrying the time it was sent (Unix ns), then [DONE].
func apiStream(token []byte) http.HandlerFunc {
	want := append([]byte("Bearer "), token...)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl, _ := w.(http.Flusher)
		for i := range streamEvents {
			if i > 0 {
				time.Sleep(streamGap)
			}
			io.WriteString(w, "data: {\"i\":"+strconv.Itoa(i)+",\"sent\":"+strconv.FormatInt(time.Now().UnixNano(), 10)+"}\n\n")
			if fl != nil {
				fl.Flush()
			}
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}
}

// otherAnswer is the second server: it answers 200 to everything (it only
// records what reaches it).
func otherAnswer(seen) (int, string) { return http.StatusOK, "hello from " + otherHost }
