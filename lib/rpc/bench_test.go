package rpc

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hostkit.dev/lib/wire"
)

// BenchmarkHealthRoundTrip: one client, one connection, sequential health
// calls over a real Unix socket.
func BenchmarkHealthRoundTrip(b *testing.B) {
	h := start(b, options{plainLog: true})
	ctx := context.Background()
	if err := h.client.Call(ctx, "health", nil, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := h.client.Call(ctx, "health", nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHealthRoundTripParallel: one client (and connection) per
// goroutine.
func BenchmarkHealthRoundTripParallel(b *testing.B) {
	h := start(b, options{plainLog: true})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c := NewClient(h.path, 0)
		defer c.Close()
		for pb.Next() {
			if err := c.Call(ctx, "health", nil, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkRawEcho is the physical floor for the round trips above: the
// same socket kind, a goroutine that reads a 4-byte length-prefixed frame
// and writes it back, and a client that writes a frame of a health
// request's size and reads it back.
func BenchmarkRawEcho(b *testing.B) {
	path := filepath.Join(makeDir(b), "e.sock")
	stop := rawEchoServer(b, path)
	defer stop()
	c, err := net.Dial("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	frame := wire.AppendFrame(nil, wire.AppendRequest(nil, req("health")))
	back := make([]byte, len(frame))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, back[:4]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, back[4:4+binary.BigEndian.Uint32(back)]); err != nil {
			b.Fatal(err)
		}
	}
}

// rawEchoServer echoes length-prefixed frames on path until stop.
func rawEchoServer(tb testing.TB, path string) (stop func()) {
	l, err := net.Listen("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	conns := make(chan net.Conn, 64)
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns <- c
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					if _, err := io.ReadFull(c, buf[:4]); err != nil {
						return
					}
					n := 4 + int(binary.BigEndian.Uint32(buf))
					if _, err := io.ReadFull(c, buf[4:n]); err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return func() {
		l.Close()
		<-done
		close(conns)
		for c := range conns {
			c.Close()
		}
		time.Sleep(10 * time.Millisecond) // let echo goroutines see the close
	}
}

// BenchmarkDecodeRequest1KiB decodes a request envelope whose body holds
// 1 KiB of text, then the body into its struct.
func BenchmarkDecodeRequest1KiB(b *testing.B) {
	r := req("test.echo")
	body, err := wire.Marshal(&echoBody{Msg: strings.Repeat("x", 1024)})
	if err != nil {
		b.Fatal(err)
	}
	r.Body = body
	payload := wire.AppendRequest(nil, r)
	b.Run("envelope", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			if _, err := wire.DecodeRequest(payload, wire.Limits{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("envelope+body", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			d, err := wire.DecodeRequest(payload, wire.Limits{})
			if err != nil {
				b.Fatal(err)
			}
			var e echoBody
			if err := (&Call{Body: d.Body}).Decode(&e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
