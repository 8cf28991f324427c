package demo

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// transcript is what the demo prints: every line goes to the user's writer
// and to a copy that the last assertion scans for the raw token. Only the
// demo's own goroutine writes to it.
type transcript struct {
	w        io.Writer
	copy     bytes.Buffer
	failures []string
}

func (t *transcript) printf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	t.copy.WriteString(s)
	io.WriteString(t.w, s)
}

// step starts a numbered section.
func (t *transcript) step(n int, title string) { t.printf("\n%d. %s\n", n, title) }

// ok prints a held assertion.
func (t *transcript) ok(format string, args ...any) { t.printf("  ok    "+format+"\n", args...) }

// note prints an indented line that asserts nothing.
func (t *transcript) note(format string, args ...any) { t.printf("        "+format+"\n", args...) }

// warn prints a line the user must not miss (not a failure).
func (t *transcript) warn(format string, args ...any) { t.printf("  NOTE  "+format+"\n", args...) }

// fail prints a FAIL line and records it: the demo then exits non-zero.
func (t *transcript) fail(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	t.failures = append(t.failures, s)
	t.printf("  FAIL  %s\n", s)
}

// check prints ok or FAIL and reports whether cond held.
func (t *transcript) check(cond bool, okMsg, failMsg string) bool {
	if cond {
		t.ok("%s", okMsg)
	} else {
		t.fail("%s", failMsg)
	}
	return cond
}

// secretForms are the encodings of v the scans look for (as egressd's
// scrubber does: raw, percent-encoded, base64 and hex).
func secretForms(v []byte) [][]byte {
	return [][]byte{v, []byte(url.QueryEscape(string(v))), []byte(base64.StdEncoding.EncodeToString(v)),
		[]byte(base64.RawURLEncoding.EncodeToString(v)), []byte(hex.EncodeToString(v))}
}

// containsSecret reports whether b holds v in any of its forms.
func containsSecret(b, v []byte) bool {
	if len(v) == 0 {
		return false
	}
	for _, f := range secretForms(v) {
		if bytes.Contains(b, f) {
			return true
		}
	}
	return false
}

// preview shows a secret safely: its first 4 characters and its length.
func preview(v []byte) string {
	n := min(4, len(v)/4)
	return fmt.Sprintf("%s… (%d chars)", strings.ToValidUTF8(string(v[:n]), "?"), len(v))
}
