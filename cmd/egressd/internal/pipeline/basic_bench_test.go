package pipeline

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/cmd/egressd/internal/loopowner"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/redact"
)

// benchPipeline is a pipeline whose registry holds invocation "inv" with
// leases (the fixture takes a *testing.T).
func benchPipeline(b *testing.B, leases ...secretdapi.Lease) (*Pipeline, *bundle.Bundle) {
	b.Helper()
	sc := redact.NewScrubber()
	reg := bundle.NewRegistry(&egresstest.Consumer{Leases: leases}, sc)
	req := &egressdapi.BundleRegisterRequest{Invocation: "inv", ProxyToken: token}
	for i := range leases {
		req.Handles = append(req.Handles, []byte{byte(i + 1)})
	}
	if _, err := reg.Register(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	al, err := audit.Open(audit.Options{Dir: b.TempDir(), Daemon: "egressd", Scrubber: sc, Fsync: audit.FsyncNever})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { al.Close() })
	tr := transport.New(transport.Config{})
	b.Cleanup(tr.Close)
	p := New(Config{Registry: reg, Transport: tr, Owner: loopowner.Checker{}, Audit: al, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	bu, err := reg.Get("inv")
	if err != nil {
		b.Fatal(err)
	}
	return p, bu
}

// BenchmarkPlacementsBasic measures step 3 of a proxied request (the
// placement and the search for misplaced placeholders) for a credential
// staged as "Authorization: Bearer {}" and for one staged at
// basic:password, with a request of six header fields; and the two
// checks Basic support adds to every proxied request whatever its
// credentials: ScanProxyAuth over egressd's own Proxy-Authorization
// (absolute-form requests carry it) and the Basic read of a header value
// that is not Basic.
func BenchmarkPlacementsBasic(b *testing.B) {
	const base = "https://api.test"
	common := []string{"User-Agent", "git/2.39.5", "Accept", "*/*", "Accept-Encoding", "deflate, gzip", "Pragma", "no-cache", "Git-Protocol", "version=2"}
	for _, bc := range []struct {
		name, target, template, auth string
	}{
		{"bearer", "header:Authorization", "Bearer {}", "Bearer " + ph},
		{"basic", "basic:password", "", basicHdr("alice", ph)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, bu := benchPipeline(b, lease(base, bc.target, bc.template))
			rec, err := p.Validate(Input{Method: "GET", URL: base + "/repo.git/info/refs?service=git-upload-pack", Header: hdr(append(common, "Authorization", bc.auth)...)})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				attach, err := p.Placements(bu, rec)
				if err != nil || len(attach) != 1 {
					b.Fatal(attach, err)
				}
			}
		})
	}
	p, _ := benchPipeline(b, lease(base, "basic:password", ""))
	b.Run("scan proxy-authorization", func(b *testing.B) {
		fields := hdr(append(common, "Proxy-Authorization", basicHdr("inv", token))...)
		b.ReportAllocs()
		for b.Loop() {
			if err := p.ScanProxyAuth(fields); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("basic read of another value", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if p.basicPlaceholder("deflate, gzip") {
				b.Fatal("found")
			}
		}
	})
}
