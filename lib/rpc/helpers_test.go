package rpc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// canary is a secret-looking value the redaction tests push through every
// path a client controls; it must never come back out.
const canary = "canary-Zq81-secret-value"

// Role names used by the harness.
const (
	roleAdmin Role = "admin"
	roleOps   Role = "ops"
)

var euid = uint32(os.Geteuid())

// echoBody is test.echo's strict request and response body. Fields are
// declared in bytewise key order, as wire.Marshal requires.
type echoBody struct {
	Msg  string            `msgpack:"msg,omitempty"`
	N    int64             `msgpack:"n,omitempty"`
	Tags map[string]string `msgpack:"tags,omitempty"`
}

// infoBody is what test.info reports about the call it served.
type infoBody struct {
	Corr        string `msgpack:"corr,omitempty"`
	CtxCorr     string `msgpack:"ctx_corr,omitempty"`
	CtxDeadline int64  `msgpack:"ctx_deadline,omitempty"` // Unix ms of the handler ctx's deadline
	Deadline    int64  `msgpack:"deadline,omitempty"`     // Unix ms of Call.Deadline
	Idem        string `msgpack:"idem,omitempty"`
	UID         uint32 `msgpack:"uid,omitempty"`
}

// slowBody asks test.slow to sleep MS milliseconds (0: until ctx is done).
type slowBody struct {
	MS int64 `msgpack:"ms,omitempty"`
}

type countBody struct {
	N int64 `msgpack:"n,omitempty"`
}

// syncBuffer is a bytes.Buffer safe for the server's concurrent log writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// eventLog collects audit events.
type eventLog struct {
	mu  sync.Mutex
	evs []Event
}

func (l *eventLog) add(_ context.Context, e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, e)
}

func (l *eventLog) all() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.evs...)
}

// find returns the events with code, waiting up to a second for one to
// arrive (the server audits before it answers, but tests read after).
func (l *eventLog) find(code string) []Event {
	var out []Event
	for range 100 {
		out = out[:0]
		for _, e := range l.all() {
			if e.Code == code {
				out = append(out, e)
			}
		}
		if len(out) > 0 {
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
	return out
}

// harness is a running Server on a real socket with the test ops.
type harness struct {
	dir     string
	path    string
	srv     *Server
	client  *Client
	logs    *syncBuffer
	events  *eventLog
	counter atomic.Int64 // test.idem's executions
	cancel  context.CancelFunc
	done    chan error
}

// options adjust a harness before it starts.
type options struct {
	cfg      func(*Config)      // adjust the server config
	sockCfg  func(*sock.Config) // adjust the listener config
	plainLog bool               // log with a plain JSON handler, no redaction
	ops      []Op               // extra ops
}

// makeDir returns a fresh short directory under /tmp, removed at cleanup.
func makeDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "hk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// testOps returns the harness's op table; counter counts test.idem runs.
func testOps(counter *atomic.Int64) []Op {
	admin := []Role{roleAdmin}
	return []Op{
		{Name: "health", Handler: func(context.Context, *Call) (any, error) {
			return map[string]any{"status": "ok"}, nil
		}},
		{Name: "test.echo", Roles: admin, Handler: func(_ context.Context, c *Call) (any, error) {
			var b echoBody
			if err := c.Decode(&b); err != nil {
				return nil, err
			}
			return &b, nil
		}},
		{Name: "test.info", Roles: admin, Handler: func(ctx context.Context, c *Call) (any, error) {
			d, _ := ctx.Deadline()
			return &infoBody{Corr: c.Corr, CtxCorr: CorrFrom(ctx), CtxDeadline: d.UnixMilli(), Deadline: c.Deadline.UnixMilli(), Idem: c.Idem, UID: c.Peer.UID}, nil
		}},
		{Name: "test.slow", Roles: admin, Handler: func(ctx context.Context, c *Call) (any, error) {
			var b slowBody
			if err := c.Decode(&b); err != nil {
				return nil, err
			}
			if b.MS <= 0 {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			select {
			case <-time.After(time.Duration(b.MS) * time.Millisecond):
				return &b, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}},
		{Name: "test.idem", Roles: admin, Handler: func(_ context.Context, c *Call) (any, error) {
			var b countBody
			if err := c.Decode(&b); err != nil {
				return nil, err
			}
			return &countBody{N: counter.Add(1)}, nil
		}},
		{Name: "test.stream", Roles: admin, Handler: func(context.Context, *Call) (any, error) {
			return map[string]any{"accepted": true}, nil
		}, Stream: echoStream},
		{Name: "test.panic", Roles: admin, Handler: func(context.Context, *Call) (any, error) {
			panic("handler exploded holding " + canary)
		}},
		{Name: "test.internal", Roles: admin, Handler: func(context.Context, *Call) (any, error) {
			return nil, fmt.Errorf("database dsn postgres://u:%s@db failed", canary)
		}},
		{Name: "test.ops", Roles: []Role{roleOps}, Handler: func(context.Context, *Call) (any, error) {
			return nil, nil
		}},
	}
}

// echoStream echoes data frames until detach; data "fail" ends it with a
// coded error, "boom" with an uncoded one that holds the canary.
func echoStream(ctx context.Context, _ *Call, st *Stream) error {
	for {
		f, err := st.Recv()
		if err != nil {
			return err
		}
		switch {
		case f.T == wire.StreamDetach:
			return nil
		case f.T == wire.StreamData && string(f.B) == "fail":
			return wire.Errorf("test.failed", "the stream failed")
		case f.T == wire.StreamData && string(f.B) == "boom":
			return errors.New("stream broke near " + canary)
		case f.T == wire.StreamData:
			if err := st.Send(&wire.StreamFrame{T: wire.StreamData, B: f.B}); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// newLogger returns the server's logger writing JSON to buf: through the
// redacting handler with the canary registered, unless plain.
func newLogger(buf io.Writer, plain bool) *slog.Logger {
	inner := slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	if plain {
		return slog.New(inner)
	}
	sc := redact.NewScrubber()
	sc.Register([]byte(canary))
	return slog.New(redact.NewHandler(inner, sc))
}

// start runs a server with the test ops on a fresh socket. The server is
// stopped, and Serve's nil result checked, at cleanup.
func start(t testing.TB, o options) *harness {
	t.Helper()
	h := &harness{dir: makeDir(t), logs: &syncBuffer{}, events: &eventLog{}, done: make(chan error, 1)}
	h.path = filepath.Join(h.dir, "d", "api.sock")
	cfg := Config{
		Daemon: "testd",
		Roles:  Roles{roleAdmin: {euid}, roleOps: {4242}},
		Logger: newLogger(h.logs, o.plainLog),
		Audit:  h.events.add,
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	sc := sock.Config{Path: h.path, Group: -1}
	if o.sockCfg != nil {
		o.sockCfg(&sc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	l, err := sock.Listen(ctx, sc)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	srv, err := NewServer(cfg, append(testOps(&h.counter), o.ops...)...)
	if err != nil {
		cancel()
		l.Close()
		t.Fatal(err)
	}
	h.srv = srv
	go func() { h.done <- srv.Serve(ctx, l) }()
	h.client = NewClient(h.path, 5*time.Second)
	t.Cleanup(func() { h.stop(t) })
	return h
}

// stop cancels Serve and checks it returned nil; safe to call twice.
func (h *harness) stop(t testing.TB) {
	t.Helper()
	h.client.Close()
	h.cancel()
	select {
	case err, ok := <-h.done:
		if ok && err != nil {
			t.Errorf("Serve: %v", err)
		}
		if ok {
			close(h.done)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("Serve did not return")
	}
}

// --- raw protocol helpers ---

func newID() []byte {
	id := make([]byte, wire.IDLen)
	rand.Read(id)
	return id
}

// req returns a request for op with a fresh id and a 5 s deadline.
func req(op string) *wire.Request {
	return &wire.Request{ID: newID(), Op: op, Deadline: time.Now().Add(5 * time.Second).UnixMilli()}
}

func dialRaw(t testing.TB, path string) *net.UnixConn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.UnixConn)
}

func writeRaw(t testing.TB, c net.Conn, b []byte) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// sendPayload writes payload as one frame.
func sendPayload(t testing.TB, c net.Conn, payload []byte) {
	t.Helper()
	writeRaw(t, c, wire.AppendFrame(nil, payload))
}

func sendReq(t testing.TB, c net.Conn, r *wire.Request) {
	t.Helper()
	sendPayload(t, c, wire.AppendRequest(nil, r))
}

// encode returns the canonical encoding of m (for hand-made envelopes).
func encode(t testing.TB, m map[string]any) []byte {
	t.Helper()
	b, err := wire.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// envelope returns a valid request envelope as a map, to be tampered with.
func envelope(op string) map[string]any {
	return map[string]any{"v": 1, "id": newID(), "op": op, "deadline": time.Now().Add(5 * time.Second).UnixMilli()}
}

// readPayload reads one frame's payload within 5 s.
func readPayload(t testing.TB, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	p, err := wire.ReadFrame(c, 0)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return p
}

func readResp(t testing.TB, c net.Conn) *wire.Response {
	t.Helper()
	r, err := wire.DecodeResponse(readPayload(t, c), wire.Limits{})
	if err != nil {
		t.Fatalf("decoding the answer: %v", err)
	}
	return r
}

// errCode returns the code of a failed response, "" for a success.
func errCode(r *wire.Response) string {
	if r.OK || r.Err == nil {
		return ""
	}
	return r.Err.Code
}

// closedWithin reports whether c reaches EOF (or a reset) within d; any
// frames still buffered are read and discarded first.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 512)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
}

// leaks returns the forms of canary found in s: raw, base64 and hex.
func leaks(s string) []string {
	var out []string
	for _, f := range []string{canary, base64.StdEncoding.EncodeToString([]byte(canary))[:24], hex.EncodeToString([]byte(canary))} {
		if strings.Contains(s, f) {
			out = append(out, f)
		}
	}
	return out
}

// asWire asserts err is a *wire.Error with code and returns it.
func asWire(t testing.TB, err error, code string) *wire.Error {
	t.Helper()
	is := is.New(t)
	var we *wire.Error
	is.True(errors.As(err, &we)) // a *wire.Error
	if we.Code != code {
		t.Fatalf("code %q (%v), want %q", we.Code, err, code)
	}
	is.True(errors.Is(err, &wire.Error{Code: code}))
	return we
}
