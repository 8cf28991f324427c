package provider

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// capture regenerates the codec's fixtures from the real runtimes:
//
//	go test -run TestCaptureFixtures -hk.capture ./internal/provider/
//
// It writes ../codec/testdata/<codec line>/*: the exact stdout of each
// command, through the same argv the provider runs. Timestamps, pids and
// paths change on every capture; the codec tests assert shapes, not
// those values.
var capture = flag.Bool("hk.capture", false, "rewrite ../codec/testdata from the installed runc and crun")

func TestCaptureFixtures(t *testing.T) {
	if !*capture {
		t.Skip("fixtures are checked in; -hk.capture rewrites them")
	}
	for _, name := range runtimes {
		t.Run(name, func(t *testing.T) { captureRuntime(t, name) })
	}
}

// captureRuntime runs one runtime through every verb the codec decodes and
// saves each stdout.
func captureRuntime(t *testing.T, name string) {
	ctx := context.Background()
	e := newEnv(t, name)
	p := e.p.(*cli)
	info, err := p.Negotiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "codec", "testdata", info.Codec)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	save := func(file string, v verb, args ...string) {
		t.Helper()
		res, _, err := p.run(ctx, v, nil, args)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), res.Stdout, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	save("version.txt", verbVersion)
	save("list-empty.json", verbList, "--format", "json")
	e.create(t, "created", ann("created"))
	e.create(t, "running", nil, "sh", "-c", "echo running; exec sleep 600")
	if err := e.p.Start(ctx, "running"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e.p, "running", StatusRunning)
	e.create(t, "stopped", ann("stopped"), "true")
	if err := e.p.Start(ctx, "stopped"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e.p, "stopped", StatusStopped)
	save("state-created.json", verbState, "created")
	save("state-running-noannotations.json", verbState, "running")
	save("state-stopped.json", verbState, "stopped")
	save("list.json", verbList, "--format", "json")
	save("ps.json", verbPs, "--format", "json", "running")
	if stored := p.codec.Features().StoredConfig; stored != "" {
		b, err := os.ReadFile(filepath.Join(p.root, "created", stored))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stored-config.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if stored := p.codec.Features().StoredState; stored != "" {
		b, err := os.ReadFile(filepath.Join(p.root, "created", stored))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stored-state.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if name == Runc {
		save("ps-stopped.json", verbPs, "--format", "json", "stopped") // crun 1.8 crashes here
		save("events-stats.json", verbEvents, "--stats", "running")
	}
	_ = e.p.Kill(ctx, "running", syscall.SIGKILL, false)
}
