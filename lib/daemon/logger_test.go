package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/redact"
)

// logLines decodes every line of buf as one JSON object.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestNewLogger(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-VALUE-xyz"
	tests := []struct {
		name  string
		log   func(*slog.Logger)
		check func(is *is.I, line map[string]any)
	}{
		{
			name: "daemon field and message",
			log:  func(l *slog.Logger) { l.Info("daemon.ready", slog.String(KeySocket, "/x/api.sock")) },
			check: func(is *is.I, line map[string]any) {
				is.Equal(line[KeyDaemon], "secretd")
				is.Equal(line["msg"], "daemon.ready")
				is.Equal(line[KeySocket], "/x/api.sock")
				is.Equal(line["level"], "INFO")
			},
		},
		{
			name: "registered value in a field",
			log:  func(l *slog.Logger) { l.Info("x", slog.String("note", "value is "+secret)) },
			check: func(is *is.I, line map[string]any) {
				is.True(!strings.Contains(line["note"].(string), secret))
			},
		},
		{
			name: "registered value in the message",
			log:  func(l *slog.Logger) { l.Warn("leaked " + secret) },
			check: func(is *is.I, line map[string]any) {
				is.True(!strings.Contains(line["msg"].(string), secret))
			},
		},
		{
			name: "registered value in an error",
			log:  func(l *slog.Logger) { l.Error("x", slog.Any(KeyErr, errString("open "+secret+": denied"))) },
			check: func(is *is.I, line map[string]any) {
				is.True(!strings.Contains(line[KeyErr].(string), secret))
			},
		},
		{
			name: "sensitive keys",
			log: func(l *slog.Logger) {
				l.Info("x", slog.String("token", "abcdef123456"), slog.String("password", "hunter22"), slog.String("api_key", "k-123456"))
			},
			check: func(is *is.I, line map[string]any) {
				is.Equal(line["token"], redact.Redacted)
				is.Equal(line["password"], redact.Redacted)
				is.Equal(line["api_key"], redact.Redacted)
			},
		},
		{
			name: "sensitive key in a group",
			log:  func(l *slog.Logger) { l.Info("x", slog.Group("req", slog.String("authorization", "Bearer abcdef"))) },
			check: func(is *is.I, line map[string]any) {
				is.Equal(line["req"].(map[string]any)["authorization"], redact.Redacted)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			s := redact.NewScrubber()
			s.Register([]byte(secret))
			var buf bytes.Buffer
			tt.log(NewLogger(&buf, slog.LevelInfo, s, "secretd"))
			is.True(!strings.Contains(buf.String(), secret)) // raw value never in the output
			lines := logLines(t, &buf)
			is.Equal(len(lines), 1)
			is.Equal(lines[0][KeyDaemon], "secretd")
			tt.check(is, lines[0])
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestNewLoggerLevelAndNilScrubber(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var buf bytes.Buffer
	l := NewLogger(&buf, slog.LevelWarn, nil, "egressd")
	l.Info("dropped")
	l.Debug("dropped")
	l.Warn("kept", slog.String("secret", "abcdefgh"))
	lines := logLines(t, &buf)
	is.Equal(len(lines), 1)
	is.Equal(lines[0]["msg"], "kept")
	is.Equal(lines[0][KeyDaemon], "egressd")
	is.Equal(lines[0]["secret"], redact.Redacted)
}
