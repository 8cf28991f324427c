//go:build linux

package netns

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// BenchmarkTransparentHop compares, inside a real namespace, small
// request/response exchanges on one kept-alive connection through the
// proxy-variable path's hop (Bridge on the proxy address, the client's
// own CONNECT) and through the transparent path's hop (the redirect rule,
// SO_ORIGINAL_DST, the peek, the relay's CONNECT), both to the same
// echoing proxy socket. egressd's own work per request is the same on
// both paths once the tunnel is up (docs/egressd.md), so this is the
// whole difference the transparent path adds. It also reports the p50 of
// a DNS A answer over UDP from the namespace's resolver.
func BenchmarkTransparentHop(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("network namespaces need root")
	}
	dir, _ := os.MkdirTemp("/tmp", "nsbh")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "p.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer ul.Close()
	fp := &fakeProxy{}
	go fp.serve(ul)
	ns, err := New()
	if err != nil {
		b.Fatal(err)
	}
	defer ns.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, _, err := ns.TransparentEgress(ctx, EgressConfig{ProxySocket: sock, Allow: []string{"https://api.example.com"}, Log: slog.New(slog.DiscardHandler)}); err != nil {
		b.Fatal(err)
	}
	pl, err := ns.Listen(ProxyAddress)
	if err != nil {
		b.Fatal(err)
	}
	go Bridge(ctx, pl, sock, slog.New(slog.DiscardHandler))
	msg := []byte("GET /bench HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer hkp_x\r\n\r\n")
	run := func(b *testing.B, dial func() (net.Conn, error)) {
		var c net.Conn
		if err := ns.Do(func() (err error) { c, err = dial(); return err }); err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		buf := make([]byte, len(msg))
		b.ResetTimer()
		for b.Loop() {
			if _, err := c.Write(msg); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("proxy-variable", func(b *testing.B) {
		run(b, func() (net.Conn, error) {
			c, err := net.Dial("tcp", ProxyAddress)
			if err != nil {
				return nil, err
			}
			io.WriteString(c, "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n")
			br := bufio.NewReader(c)
			if _, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil {
				return nil, err
			}
			return c, nil
		})
	})
	b.Run("transparent", func(b *testing.B) {
		run(b, func() (net.Conn, error) { return net.Dial("tcp", "192.0.2.1:443") })
	})
	b.Run("dns", func(b *testing.B) {
		var c net.Conn
		if err := ns.Do(func() (err error) { c, err = net.Dial("udp", "127.0.0.1:53"); return err }); err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		q := query(b, "api.example.com.", dnsmessage.TypeA)
		buf := make([]byte, 512)
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			c.Write(q)
			if _, err := c.Read(buf); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	})
}
