package redact

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
)

// leakChecker registers the canaries in a Scrubber and reports whether any
// raw or encoded form of them appears in text.
type leakChecker struct{ s *Scrubber }

func newLeakChecker() leakChecker {
	s := NewScrubber()
	s.Register([]byte(canary))
	s.Register([]byte(specialCanary))
	return leakChecker{s}
}

func (c leakChecker) check(t *testing.T, out string) {
	t.Helper()
	is := is.New(t)
	is.True(!strings.Contains(out, canary))
	is.True(!strings.Contains(out, "7f3a9c21"))
	is.True(!c.s.Contains([]byte(out)))
}

type payload struct {
	Name string
	Note string
}

type loggable struct{ v string }

func (l loggable) LogValue() slog.Value { return slog.StringValue("wrapped " + l.v) }

type rawBytes struct{ Data []byte }

type jsonOnly struct {
	T string `json:"token"`
}

func TestHandlerCanaryEveryPath(t *testing.T) {
	t.Parallel()
	basic := func(prefix string) string {
		return base64.StdEncoding.EncodeToString([]byte(prefix + canary))
	}
	tests := []struct {
		name string
		log  func(l *slog.Logger)
	}{
		{"msg", func(l *slog.Logger) { l.Info("got " + canary) }},
		{"attr", func(l *slog.Logger) { l.Info("m", "v", canary) }},
		{"sensitive key", func(l *slog.Logger) { l.Info("m", "password", "hunter2"+canary) }},
		{"key", func(l *slog.Logger) { l.Info("m", canary, 1) }},
		{"group", func(l *slog.Logger) { l.Info("m", slog.Group("g", "v", canary, slog.Group("h", "w", canary))) }},
		{"sensitive group", func(l *slog.Logger) { l.Info("m", slog.Group("auth", "user", canary)) }},
		{"with attrs", func(l *slog.Logger) { l.With("v", canary).Info("m") }},
		{"with group", func(l *slog.Logger) { l.WithGroup("g").With("v", canary).Info("m", "w", canary) }},
		{"group name", func(l *slog.Logger) { l.WithGroup(canary).Info("m", "w", 1) }},
		{"error", func(l *slog.Logger) { l.Info("m", "err", fmt.Errorf("dial: %w", errors.New(canary))) }},
		{"struct", func(l *slog.Logger) { l.Info("m", "p", payload{Name: "x", Note: canary}) }},
		{"pointer struct", func(l *slog.Logger) { l.Info("m", "p", &payload{Note: canary}) }},
		{"bytes", func(l *slog.Logger) { l.Info("m", "b", []byte(canary)) }},
		{"struct bytes", func(l *slog.Logger) { l.Info("m", "p", rawBytes{Data: []byte(canary)}) }},
		{"json tag", func(l *slog.Logger) { l.Info("m", "p", jsonOnly{T: "abc"}) }},
		{"log valuer", func(l *slog.Logger) { l.Info("m", "lv", loggable{canary}) }},
		{"secret", func(l *slog.Logger) { l.Info("m", "s", NewSecret([]byte(canary))) }},
		{"query escaped", func(l *slog.Logger) { l.Info("m", "u", "https://h/?q="+url.QueryEscape(specialCanary)) }},
		{"path escaped", func(l *slog.Logger) { l.Info("m", "u", "https://h/"+url.PathEscape(specialCanary)) }},
		{"base64", func(l *slog.Logger) { l.Info("m", "v", base64.StdEncoding.EncodeToString([]byte(canary))) }},
		{"basic align 0", func(l *slog.Logger) { l.Info("m", "hdr", "X-Echo: "+basic("abc")) }},
		{"basic align 1", func(l *slog.Logger) { l.Info("m", "hdr", "X-Echo: "+basic("user")) }},
		{"basic align 2", func(l *slog.Logger) { l.Info("m", "hdr", "X-Echo: "+basic("user:")) }},
		{"hex", func(l *slog.Logger) { l.Info("m", "v", hex.EncodeToString([]byte(canary))) }},
		{"hex upper", func(l *slog.Logger) { l.Info("m", "v", strings.ToUpper(hex.EncodeToString([]byte(canary)))) }},
		{"any map", func(l *slog.Logger) { l.Info("m", "m", map[string]string{"k": canary}) }},
	}
	c := newLeakChecker()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			var buf bytes.Buffer
			tt.log(slog.New(NewHandler(slog.NewJSONHandler(&buf, nil), c.s)))
			is.True(buf.Len() > 0)
			c.check(t, buf.String())
			is.True(!strings.Contains(buf.String(), "hunter2"))
			is.True(!strings.Contains(buf.String(), `"abc"`))
			var tbuf bytes.Buffer
			tt.log(slog.New(NewHandler(slog.NewTextHandler(&tbuf, nil), c.s)))
			c.check(t, tbuf.String())
		})
	}
}

func TestHandlerKeepsSafeValues(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var buf bytes.Buffer
	l := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil), NewScrubber()))
	l.With("daemon", "egressd").WithGroup("req").Info("egress.decision",
		"token_fp", "ab12", "n", 3, "ok", true, "ports", []int{1, 2},
		"placeholder", "hkp_abcdefghijklmnopqrstuvwxyz234567", "api_key", "zz")
	out := buf.String()
	for _, want := range []string{`"msg":"egress.decision"`, `"daemon":"egressd"`, `"token_fp":"ab12"`,
		`"n":3`, `"ok":true`, `"ports":[1,2]`, `"api_key":"[REDACTED]"`, `"req":{`,
		`"placeholder":"hkp_abcdefghijklmnopqrstuvwxyz234567"`} {
		is.True(strings.Contains(out, want)) // want in output
	}
}

func TestHandlerLateRegistrationAndConcurrency(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := NewScrubber()
	var mu sync.Mutex
	var buf bytes.Buffer
	l := slog.New(NewHandler(slog.NewJSONHandler(lockedWriter{&mu, &buf}, nil), s)).With("d", "x")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			v := fmt.Sprintf("late-secret-%02d-value", i)
			s.Register([]byte(v))
			for range 20 {
				l.WithGroup("g").Info("m "+v, "v", v, "e", errors.New(v))
			}
		})
	}
	wg.Wait()
	is.True(!strings.Contains(buf.String(), "late-secret"))
	is.True(!s.Contains(buf.Bytes()))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

func TestHandlerEnabled(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := NewHandler(slog.NewJSONHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelWarn}), nil)
	is.True(!h.Enabled(context.Background(), slog.LevelInfo))
	is.True(h.Enabled(context.Background(), slog.LevelError))
}

// TestHandlerCleanRecordUnchanged: a record redaction leaves alone is
// written exactly as the inner handler writes it unwrapped, and one with
// anything to redact is not.
func TestHandlerCleanRecordUnchanged(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := NewScrubber()
	s.Register([]byte(canary))
	opts := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	var plain, red bytes.Buffer
	pl := slog.New(slog.NewJSONHandler(&plain, opts))
	rl := slog.New(NewHandler(slog.NewJSONHandler(&red, opts), s))
	clean := []any{"origin", "http://127.0.0.1:8080", "path", "/v1/x", "status", 200, "bytes", uint64(5), "ok", true,
		"ms", 1.5, "d", time.Second, "at", time.Unix(1, 0).UTC()}
	pl.Info("egress.decision", clean...)
	rl.Info("egress.decision", clean...)
	is.Equal(red.String(), plain.String())
	for _, dirty := range [][]any{{"origin", "https://u:p@h"}, {"token", "x"}, {"v", "echo " + canary}, {canary, 1}} {
		plain.Reset()
		red.Reset()
		pl.Info("m", dirty...)
		rl.Info("m", dirty...)
		is.True(red.String() != plain.String()) // dirty
	}
}
