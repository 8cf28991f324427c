package egressdapi

// HeaderTransparent marks a CONNECT as the bridge of an isolated instance
// relaying a connection it redirected (docs/egressd.md, "Transparent
// connections"): its value says what the bridge peeked in the client's
// first bytes. egressd accepts it only on its Unix proxy socket (a
// CONNECT carrying it on the TCP listener is refused with
// egress.transparent_refused), never forwards it, and decides as for a
// CONNECT to the same authority, with the differences its value names.
const HeaderTransparent = "Hostkit-Transparent"

// Values of HeaderTransparent. Any other value is egress.transparent_refused.
const (
	// TransparentTLS: the client's first bytes are a TLS handshake record.
	// egressd decides as for CONNECT, and checks the ClientHello's server
	// name against the CONNECT host in an opaque tunnel too.
	TransparentTLS = "tls"
	// TransparentHTTP: the client's first bytes are an HTTP/1.x request
	// line. egressd answers 200 and serves the connection as plain-HTTP
	// proxy requests, each target made absolute from the CONNECT authority
	// (http://host[:port]), so policy and substitution apply per request.
	TransparentHTTP = "http"
	// TransparentOther: neither, or nothing arrived in time. Refused with
	// egress.raw_tcp_denied unless the policy has tcp://host:port for the
	// CONNECT authority and the invocation holds no credential.
	TransparentOther = "other"
)
