package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// hostForms are the canary as a host name's labels would carry it, each
// under example.com (which the wildcard policy allows).
func hostForms() map[string]string {
	low := strings.ToLower
	split := func(s string, n int) string {
		var parts []string
		for len(s) > n {
			parts, s = append(parts, s[:n]), s[n:]
		}
		return strings.Join(append(parts, s), ".")
	}
	b32 := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString([]byte(harnessCanary))
	return map[string]string{
		"raw, lowercased":           low(harnessCanary),
		"base64url, lowercased":     low(base64.RawURLEncoding.EncodeToString([]byte(harnessCanary))),
		"hex":                       hex.EncodeToString([]byte(harnessCanary)),
		"base32 without padding":    low(b32),
		"raw over labels":           low(split(harnessCanary, 6)),
		"base32 over labels":        low(split(b32, 11)),
		"hex pairs with hyphens":    hyphenPairs(hex.EncodeToString([]byte(harnessCanary))),
		"upper-case raw (as typed)": strings.ToUpper(harnessCanary),
	}
}

// hyphenPairs joins the pairs of a hex string with hyphens.
func hyphenPairs(h string) string {
	var pairs []string
	for i := 0; i < len(h); i += 2 {
		pairs = append(pairs, h[i:i+2])
	}
	return strings.Join(pairs, "-")
}

// TestHostScanBeforeResolution: a held value in the host of an
// absolute-form request, a CONNECT target or a Host field, in any form a
// host name can carry, is refused with egress.secret_in_request and
// audited, on both listeners, and nothing is looked up or dialled; the
// same requests to a clean name are looked up (the control: the
// recorder would have seen the others). No record, log line or answer
// holds the value.
func TestHostScanBeforeResolution(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var answers []string
	for formName, label := range hostForms() {
		host := label + ".example.com"
		for via, dial := range h.dialers() {
			for _, tc := range []struct{ name, raw string }{
				{"absolute-form", "GET https://" + host + "/x HTTP/1.1\r\nHost: " + host + "\r\n" + h.auth("open") + "\r\n"},
				{"CONNECT", "CONNECT " + host + ":443 HTTP/1.1\r\nHost: " + host + ":443\r\n" + h.auth("open") + "\r\n"},
				{"CONNECT, credentialed", "CONNECT " + host + ":443 HTTP/1.1\r\nHost: " + host + ":443\r\n" + h.auth("cred") + "\r\n"},
				{"Host field only", "GET https://clean.example.com/x HTTP/1.1\r\nHost: " + host + "\r\n" + h.auth("open") + "\r\n"},
				{"CONNECT Host field only", "CONNECT clean.example.com:443 HTTP/1.1\r\nHost: " + host + ":443\r\n" + h.auth("open") + "\r\n"},
			} {
				t.Run(formName+"/"+via+"/"+tc.name, func(t *testing.T) {
					is := is.New(t)
					resp, body, _ := exchange(t, dial, tc.raw, false, false)
					answers = append(answers, string(body))
					is.Equal(resp.StatusCode, http.StatusForbidden)
					is.Equal(resp.Header.Get(HeaderError), "egress.secret_in_request")
				})
			}
		}
	}
	names, dialled := h.rec.Seen()
	if len(names) != 0 || len(dialled) != 0 {
		t.Fatalf("looked up %q, dialled %v for hosts that hold the value", names, dialled)
	}
	audit := h.auditText(t)
	is := is.New(t)
	is.True(strings.Count(audit, `"code":"egress.secret_in_request"`) >= 5*2*len(hostForms())) // each refusal audited
	h.checkCanary(t, answers...)

	// The control: a clean name is looked up (and, unresolvable here,
	// refused for that).
	for _, raw := range []string{
		"GET https://clean.example.com/x HTTP/1.1\r\nHost: clean.example.com\r\n" + h.auth("open") + "\r\n",
		"CONNECT clean.example.com:443 HTTP/1.1\r\nHost: clean.example.com:443\r\n" + h.auth("open") + "\r\n",
	} {
		resp, _, _ := exchange(t, h.dialers()["tcp"], raw, false, false)
		is.Equal(resp.Header.Get(HeaderError), "egress.upstream_error") // the lookup failed
	}
	names, _ = h.rec.Seen()
	is.Equal(names, []string{"clean.example.com", "clean.example.com"})
}

// TestHostScanInsideTunnel: inside an intercepted tunnel, a Host field or
// an absolute-form authority holding the value is refused with
// egress.secret_in_request (before the 421 another authority gets), and a
// clean request passes the check (and is refused only by the upstream,
// which does not exist here).
func TestHostScanInsideTunnel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	is := is.New(t)
	secretHost := strings.ToLower(harnessCanary) + ".example.com"
	for _, tc := range []struct {
		name, raw string
		status    int
		code      string
	}{
		{"Host field", "GET / HTTP/1.1\r\nHost: " + secretHost + "\r\n\r\n", 403, "egress.secret_in_request"},
		{"absolute-form", "GET https://" + secretHost + "/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 403, "egress.secret_in_request"},
		{"another clean authority", "GET / HTTP/1.1\r\nHost: other.example.com\r\n\r\n", 421, "egress.header_invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			tc2, br := h.intercepted(t, "api.example.com", "api.example.com")
			if _, err := tc2.Write([]byte(tc.raw)); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			is.NoErr(err)
			resp.Body.Close()
			is.Equal(resp.StatusCode, tc.status)
			is.Equal(resp.Header.Get(HeaderError), tc.code)
		})
	}
	names, dialled := h.rec.Seen()
	is.Equal(len(names), 0)
	is.Equal(len(dialled), 0)
	h.checkCanary(t)
}

// intercepted opens CONNECT authority as "cred" on the TCP listener and a
// TLS client inside it with server name sni ("" sends none), which trusts
// egressd's CA.
func (h *harness) intercepted(t *testing.T, authority, sni string) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	tc, err := h.handshake(t, authority, sni, false)
	if err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	return tc, bufio.NewReader(tc)
}

// handshake is intercepted without failing the test on a TLS error;
// skipVerify lets the client accept the leaf whatever name it sent, so
// that a refusal comes from egressd.
func (h *harness) handshake(t *testing.T, authority, sni string, skipVerify bool) (*tls.Conn, error) {
	t.Helper()
	c, err := net.Dial("tcp", h.tcp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if !strings.Contains(authority, ":") {
		authority += ":443"
	}
	if _, err := c.Write([]byte("CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n" + h.auth("cred") + "\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %v %v", authority, resp, err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(h.ca.Cert)
	cfg := &tls.Config{ServerName: sni, RootCAs: roots, InsecureSkipVerify: skipVerify}
	if sni == "" {
		cfg.InsecureSkipVerify = true // no name to verify against
	}
	tc := tls.Client(&bufConn{Conn: c, r: br}, cfg)
	return tc, tc.Handshake()
}

// TestServerNameChecked: inside an intercepted tunnel the TLS server name
// must name the CONNECT host (refused and audited as
// egress.invalid_request otherwise) and hold no held value (refused and
// audited as egress.secret_in_request); the CONNECT host's own name, in
// any case, and no name at all are accepted. Nothing is looked up.
func TestServerNameChecked(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, tc := range []struct {
		name, sni string
		code      string // "" = accepted
	}{
		{"the CONNECT host", "api.example.com", ""},
		{"the CONNECT host, upper case", "API.Example.COM", ""},
		{"no server name", "", ""},
		{"another host", "other.example.com", "egress.invalid_request"},
		{"the value in a label", strings.ToLower(harnessCanary) + ".example.com", "egress.secret_in_request"},
		{"the value in base32", strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString([]byte(harnessCanary))) + ".example.com", "egress.secret_in_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			before := strings.Count(h.auditText(t), `"outcome":"refused"`)
			_, err := h.handshake(t, "api.example.com", tc.sni, true)
			if tc.code == "" {
				is.NoErr(err)
				return
			}
			is.True(err != nil) // the handshake is refused
			deadline := time.Now().Add(5 * time.Second)
			for strings.Count(h.auditText(t), `"outcome":"refused"`) == before && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			audit := h.auditText(t)
			is.True(strings.Count(audit, `"outcome":"refused"`) > before)
			is.True(strings.Contains(audit, `"code":"`+tc.code+`"`))
		})
	}
	names, _ := h.rec.Seen()
	is.New(t).Equal(len(names), 0)
	h.checkCanary(t)
}
