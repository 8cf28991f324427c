package wire

import (
	"fmt"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// benchBody is a typical op body (shaped like a process launch with a
// credential lease) that encodes to about 1 KiB.
type benchBody struct {
	Args    []string          `msgpack:"args,omitempty"`
	Dir     string            `msgpack:"dir,omitempty"`
	Env     map[string]string `msgpack:"env,omitempty"`
	Handles [][]byte          `msgpack:"handles,omitempty"`
	Host    string            `msgpack:"host,omitempty"`
	TTL     int64             `msgpack:"ttl_ms,omitempty"`
	TTY     bool              `msgpack:"tty,omitempty"`
}

func newBenchBody() benchBody {
	b := benchBody{
		Dir:  "/var/lib/hostkit/supervisord/instances/0123456789abcdef/work",
		Env:  map[string]string{},
		Host: "api.example.com",
		TTL:  600000,
		TTY:  true,
	}
	for i := range 8 {
		b.Args = append(b.Args, fmt.Sprintf("--option-%d=%s", i, strings.Repeat("v", 24)))
		b.Env[fmt.Sprintf("HOSTKIT_VAR_%d", i)] = strings.Repeat("e", 40)
		b.Handles = append(b.Handles, []byte(fmt.Sprintf("handle-%02d-0123456789abcdef", i)))
	}
	return b
}

// benchRequest returns a canonical request envelope carrying newBenchBody.
func benchRequest(tb testing.TB) []byte {
	tb.Helper()
	body, err := Marshal(newBenchBody())
	if err != nil {
		tb.Fatal(err)
	}
	if len(body) < 900 || len(body) > 1100 {
		tb.Fatalf("bench body is %d bytes, want about 1 KiB", len(body))
	}
	return AppendRequest(nil, &Request{
		ID: testID, Op: "instance.exec", Deadline: 1764400000000,
		Idem: "idem-0123456789", Corr: "corr-0123456789", Body: body,
	})
}

func BenchmarkDecodeRequest1KiB(b *testing.B) {
	payload := benchRequest(b)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRequest(payload, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeRequest(b *testing.B) {
	payload := benchRequest(b)
	r, err := DecodeRequest(payload, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 2048)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendRequest(buf[:0], r)
	}
}

func BenchmarkValidate(b *testing.B) {
	payload := benchRequest(b)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Validate(payload, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalBody(b *testing.B) {
	body := newBenchBody()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Marshal(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalBody(b *testing.B) {
	enc, err := Marshal(newBenchBody())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		var v benchBody
		if err := Unmarshal(enc, &v, true); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecode1KiBAllocs holds DecodeRequest of a 1 KiB envelope to at most
// 10 allocations. Not parallel: it reads process-wide allocation counters.
func TestDecode1KiBAllocs(t *testing.T) {
	is := is.New(t)
	payload := benchRequest(t)
	decode := testing.AllocsPerRun(200, func() {
		if _, err := DecodeRequest(payload, Limits{}); err != nil {
			t.Fatal(err)
		}
	})
	full := testing.AllocsPerRun(200, func() {
		r, err := DecodeRequest(payload, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		var v benchBody
		if err := Unmarshal(r.Body, &v, true); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%d-byte envelope: DecodeRequest %.0f allocs; DecodeRequest + Unmarshal %.0f allocs", len(payload), decode, full)
	is.True(decode <= 10) // the target in bench/RESULTS.md, "Foundation"
}
