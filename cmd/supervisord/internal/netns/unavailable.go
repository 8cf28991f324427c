package netns

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"time"

	"hostkit.dev/lib/api/egressdapi"
)

// Bounds of the answer to a connection the bridge cannot join to egressd.
const (
	// unavailableWait bounds the whole exchange: reading the request
	// head, writing the answer, and waiting for the client to close.
	unavailableWait = 5 * time.Second
	// maxUnavailableHead bounds the request head read, in bytes (egressd's
	// own default header limit).
	maxUnavailableHead = 64 << 10
)

// unavailableAnswer is what egressd answers an unknown invocation just
// after a restart (egress.unavailable, 503, Retry-After: 1; RFC 9110
// §15.6.4 and §10.2.3), so an agent sees the same thing whether egressd
// is down or has not yet got its bundle back.
var unavailableAnswer = func() []byte {
	body := "egressd: " + egressdapi.CodeUnavailable + ": egressd is not accepting connections (restarting?); retry in a second\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) +
		"\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\nX-Hostkit-Error: " + egressdapi.CodeUnavailable +
		"\r\n\r\n" + body)
}()

// answerUnavailable answers c, whose join to egressd's proxy socket
// failed, with the 503 above: after the request head (an empty line, at
// most maxUnavailableHead bytes, or unavailableWait), so the client is
// reading when it comes; then it half-closes and drains until the client
// closes, so the close does not reset the answer away.
func answerUnavailable(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(unavailableWait))
	br := bufio.NewReader(io.LimitReader(c, maxUnavailableHead))
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			break
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 && err == nil {
			break // the empty line that ends the head
		}
	}
	if _, err := c.Write(unavailableAnswer); err != nil {
		return
	}
	if cw, ok := c.(closeWriter); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, c)
}
