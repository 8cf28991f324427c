package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/request"
)

// TestWriteResponseMatchesNetHTTP holds writeResponse to what
// http.Response.Write (which the proxy face used before) writes for the
// same answer: methods with and without bodies, empty bodies, statuses
// without bodies, closing, repeated and odd header values; an answer to
// HEAD differs only by having no Content-Length.
func TestWriteResponseMatchesNetHTTP(t *testing.T) {
	t.Parallel()
	header := []request.Field{{Name: "Content-Type", Value: "text/plain"}, {Name: "X-A", Value: " padded\t"},
		{Name: "X-A", Value: "second"}, {Name: "X-Empty", Value: ""}, {Name: "X-Odd", Value: "a\r\nb\nc\rd"}}
	for _, method := range []string{"", "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		for _, status := range []int{200, 201, 204, 206, 299, 304, 404, 407, 421, 502, 599, 999, 42} {
			for _, body := range [][]byte{nil, []byte("hello\n")} {
				for _, closeAfter := range []bool{false, true} {
					for _, h := range [][]request.Field{nil, header} {
						hm := http.Header{}
						for _, f := range h {
							hm[f.Name] = append(hm[f.Name], f.Value)
						}
						resp := &http.Response{StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Header: hm, Close: closeAfter,
							ContentLength: int64(len(body)), Body: io.NopCloser(bytes.NewReader(body))}
						if method != "" {
							resp.Request = &http.Request{Method: method}
						}
						var want, got bytes.Buffer
						is := is.New(t)
						is.NoErr(resp.Write(&want))
						if method == http.MethodHead { // no Content-Length at all (RFC 9110 section 8.6)
							w := regexp.MustCompile("Content-Length: [0-9]+\r\n").ReplaceAllString(want.String(), "")
							want.Reset()
							want.WriteString(w)
						}
						bw := bufio.NewWriter(&got)
						writeResponse(bw, method, status, h, body, closeAfter)
						is.NoErr(bw.Flush())
						is.Equal(got.String(), want.String()) // method, status, body, close, header
					}
				}
			}
		}
	}
}

// TestMoveDeadline: the proxy face moves a deadline only when it must:
// from none, earlier, or later by more than min(1 s, timeout/16).
func TestMoveDeadline(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name    string
		cur, to time.Time
		d       time.Duration
		want    bool
	}{
		{"from none", time.Time{}, now.Add(2 * time.Minute), 2 * time.Minute, true},
		{"earlier", now.Add(2 * time.Minute), now.Add(time.Minute), time.Minute, true},
		{"a little later", now.Add(2 * time.Minute), now.Add(2*time.Minute + 5*time.Millisecond), 2 * time.Minute, false},
		{"a second later", now.Add(2 * time.Minute), now.Add(2*time.Minute + 1100*time.Millisecond), 2 * time.Minute, true},
		{"short timeout", now.Add(200 * time.Millisecond), now.Add(250 * time.Millisecond), 250 * time.Millisecond, true},
	} {
		is.New(t).Equal(moveDeadline(tc.cur, tc.to, tc.d), tc.want) // tc.name
	}
}
