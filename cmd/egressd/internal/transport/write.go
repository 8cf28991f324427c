package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// writeRequest writes req in HTTP/1.1 origin form, as net/http's
// Request.Write does for a transport (TestWriteRequestMatchesNetHTTP):
// the request line, Host (punycode, no zone), User-Agent (the first value,
// or Go's default when there is none), "Connection: close" when req.Close,
// Content-Length when the body is not empty or the method is POST, PUT or
// PATCH, the other fields sorted by name, then the body, and flushes. It
// supports what pipeline.Send sends: a known ContentLength, no transfer
// coding, no trailer.
func writeRequest(w *bufio.Writer, req *http.Request, body io.Reader) error {
	if req.ContentLength < 0 || len(req.TransferEncoding) > 0 || len(req.Trailer) > 0 {
		return errors.New("transport: only requests of a known length are supported")
	}
	if req.ContentLength > 0 && (body == nil || body == http.NoBody) {
		return fmt.Errorf("transport: ContentLength=%d with no body", req.ContentLength)
	}
	for k, vs := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("net/http: invalid header field name %q", k)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("net/http: invalid header field value for %q", k)
			}
		}
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	host, err := httpguts.PunycodeHostPort(host)
	if err != nil {
		return err
	}
	if !httpguts.ValidHostHeader(host) {
		host = "" // as net/http does when not using a proxy
	}
	host = removeZone(host)
	ruri := req.URL.RequestURI()
	if strings.IndexFunc(ruri, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 {
		return errors.New("net/http: can't write control character in Request.URL")
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	w.WriteString(method)
	w.WriteByte(' ')
	w.WriteString(ruri)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(host)
	w.WriteString("\r\n")
	ua := "Go-http-client/1.1"
	if vs, ok := req.Header["User-Agent"]; ok {
		ua = ""
		if len(vs) > 0 {
			ua = vs[0]
		}
	}
	if ua != "" {
		w.WriteString("User-Agent: ")
		w.WriteString(clean(ua))
		w.WriteString("\r\n")
	}
	if req.Close {
		w.WriteString("Connection: close\r\n")
	}
	if req.ContentLength > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(w.AvailableBuffer(), req.ContentLength, 10))
		w.WriteString("\r\n")
	}
	var arr [32]string
	keys := arr[:0]
	for k := range req.Header {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range req.Header[k] {
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(clean(v))
			w.WriteString("\r\n")
		}
	}
	w.WriteString("\r\n")
	if req.ContentLength > 0 {
		n, err := io.Copy(w, body)
		if err != nil {
			return err
		}
		if n != req.ContentLength {
			return fmt.Errorf("http: ContentLength=%d with Body length %d", req.ContentLength, n)
		}
	}
	return w.Flush()
}

// clean is what net/http does to a field value it writes: CR and LF
// become spaces, and surrounding ASCII blanks go.
func clean(v string) string {
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\n", " ", "\r", " ").Replace(v)
	}
	return textproto.TrimString(v)
}

// removeZone removes an IPv6 zone from a host[:port], as net/http does
// for the Host header.
func removeZone(host string) string {
	if !strings.HasPrefix(host, "[") {
		return host
	}
	i := strings.LastIndex(host, "]")
	if i < 0 {
		return host
	}
	j := strings.LastIndex(host[:i], "%")
	if j < 0 {
		return host
	}
	return host[:j] + host[i:]
}
