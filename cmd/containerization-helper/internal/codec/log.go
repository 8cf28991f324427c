package codec

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// maxMessage bounds the message RuntimeError returns, in bytes.
const maxMessage = 256

// RuntimeError returns the last error message in a runtime's
// `--log-format json` log: one JSON object per line, {"level":"error",
// "msg":"...","time":"..."} (runc through logrus, crun by hand). Only the
// last MaxLog bytes are read; lines that are not such objects are skipped,
// because the log is a diagnostic, not a result. The message is cut to
// 256 bytes and stripped of control characters; the caller still redacts
// it. "" when there is none.
func RuntimeError(log []byte) string {
	if len(log) > MaxLog {
		log = log[len(log)-MaxLog:]
		if i := bytes.IndexByte(log, '\n'); i >= 0 {
			log = log[i+1:] // drop the partial first line
		}
	}
	msg := ""
	for line := range bytes.SplitSeq(log, []byte("\n")) {
		var rec struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &rec) != nil {
			continue
		}
		if (rec.Level == "error" || rec.Level == "fatal") && rec.Msg != "" {
			msg = rec.Msg
		}
	}
	return clean(msg)
}

// clean strips control characters and invalid UTF-8 and cuts s to
// maxMessage bytes on a rune boundary.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	if len(s) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return strings.TrimSpace(s)
}
