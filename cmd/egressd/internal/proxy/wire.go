package proxy

import (
	"bufio"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/request"
)

// writeResponse writes an HTTP/1.1 response into w (one buffer, flushed by
// the caller), byte for byte as http.Response.Write writes one with
// ContentLength len(body), Close closeAfter and a request of method
// method ("" for none) — TestWriteResponseMatchesNetHTTP holds it to that
// — without building an http.Response, a header map and a transfer
// writer for every answer. header must be sorted by name (repeats in
// order) and hold no Connection, Content-Length, Transfer-Encoding or
// Trailer field (pipeline.Sanitize removes them; refusals have none).
//
// The rules it follows, from net/http: "Connection: close" first when
// closing; Content-Length when the body is not empty or the request was
// POST, PUT or PATCH, else (after the other fields) "Content-Length: 0"
// when the status allows a body. One difference: an answer to HEAD has
// neither a body nor a Content-Length, since RFC 9110 section 8.6 allows
// one only when it equals what GET would send, which egressd cannot
// promise after decoding and scrubbing (net/http would say 0).
func writeResponse(w *bufio.Writer, method string, status int, header []request.Field, body []byte, closeAfter bool) {
	writeStatusLine(w, status)
	if closeAfter {
		w.WriteString("Connection: close\r\n")
	}
	head := method == http.MethodHead
	sentLength := !head && (len(body) > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch)
	if sentLength {
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(len(body)), 10))
		w.WriteString("\r\n")
	}
	writeFields(w, header)
	if !sentLength && !head && pipeline.BodyAllowed(status) {
		w.WriteString("Content-Length: 0\r\n")
	}
	w.WriteString("\r\n")
	if !head {
		w.Write(body)
	}
}

// writeStatusLine writes "HTTP/1.1 <status> <reason>\r\n" (RFC 9112
// section 4), the status as three digits.
func writeStatusLine(w *bufio.Writer, status int) {
	text := http.StatusText(status)
	if text == "" {
		text = "status code " + strconv.Itoa(status)
	}
	w.WriteString("HTTP/1.1 ")
	if status >= 0 && status < 100 { // %03d
		w.WriteByte('0')
		if status < 10 {
			w.WriteByte('0')
		}
	}
	w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(status), 10))
	w.WriteByte(' ')
	w.WriteString(text)
	w.WriteString("\r\n")
}

// writeFields writes header or trailer fields, a CR or LF in a value
// replaced by a space as http.Header.Write does.
func writeFields(w *bufio.Writer, fields []request.Field) {
	for _, f := range fields {
		v := f.Value
		if strings.ContainsAny(v, "\r\n") {
			v = strings.NewReplacer("\n", " ", "\r", " ").Replace(v) // as http.Header.Write
		}
		w.WriteString(f.Name)
		w.WriteString(": ")
		w.WriteString(textproto.TrimString(v))
		w.WriteString("\r\n")
	}
}
