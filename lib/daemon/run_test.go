package daemon

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// runRecord is what a testSpec's steps saw.
type runRecord struct {
	configured bool
	served     bool
	tag        string  // the daemon's own -tag flag
	svc        Service // as Serve got it
}

// errServed is what a testSpec's Serve returns by default.
var errServed = errors.New("served")

// testSpec is a daemon "hktest-run" with the admin role, a flag of its
// own (-tag), a Configure that refuses -tag bad, and a Serve that records
// what it got and returns serve's result (errServed when serve is nil).
func testSpec(rec *runRecord, serve func(ctx context.Context, svc *Service) error) Spec {
	return Spec{
		Binary: "hktest-run",
		Name:   NameSecretd,
		Roles:  []rpc.Role{"admin"},
		Flags:  func(fs *flag.FlagSet) { fs.StringVar(&rec.tag, "tag", "", "a flag of the daemon's own") },
		Configure: func(_ *Env, svc *Service) error {
			rec.configured = true
			if rec.tag == "bad" {
				return errors.New("-tag: bad")
			}
			svc.SocketGroup = -1
			return nil
		},
		Serve: func(ctx context.Context, _ *Env, svc *Service) error {
			rec.served, rec.svc = true, *svc
			if serve != nil {
				return serve(ctx, svc)
			}
			return errServed
		},
	}
}

func TestRunStartUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		args       []string
		want       error // errors.Is; nil: no error
		status     int   // ExitStatus of the result
		configured bool
		served     bool
	}{
		{name: "version", args: []string{"-version"}, status: 0},
		{name: "help", args: []string{"-h"}, want: flag.ErrHelp, status: 0},
		{name: "unknown flag", args: []string{"-nope"}, status: 2},
		{name: "positional argument", args: []string{"extra", "-tag", "x"}, status: 2},
		{name: "unknown role user", args: []string{"-admin-users", "no-such-user-hk"}, status: 1},
		{name: "configure refuses", args: []string{"-tag", "bad"}, status: 1, configured: true},
		{name: "serves", args: []string{"-tag", "x", "-admin-users", "4242"}, want: errServed, status: 1, configured: true, served: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			root := tmpRoot(t)
			var rec runRecord
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), testSpec(&rec, nil), append([]string{"-root", root}, tc.args...), &stdout, &stderr)
			if tc.want != nil {
				is.True(errors.Is(err, tc.want)) // the expected error
			}
			is.Equal(ExitStatus(err), tc.status)
			is.Equal(rec.configured, tc.configured)
			is.Equal(rec.served, tc.served)
			socket := filepath.Join(root, "run", NameSecretd, "api.sock")
			if tc.name == "version" {
				is.NoErr(err)
				is.Equal(stdout.String(), "hktest-run "+Version+"\n")
			}
			if tc.name == "positional argument" {
				is.True(strings.Contains(err.Error(), `unexpected arguments: ["extra" "-tag" "x"]`))
			}
			if !tc.served {
				_, serr := os.Lstat(socket)
				is.True(errors.Is(serr, os.ErrNotExist)) // no socket was made
				return
			}
			is.Equal(rec.tag, "x")
			is.Equal(rec.svc.Name, NameSecretd)
			is.Equal(rec.svc.Socket, socket)
			is.Equal(rec.svc.SocketGroup, -1)
			is.True(rec.svc.Logger != nil)
			is.Equal(rec.svc.Roles, rpc.Roles{"admin": {4242}})
			is.True(rec.svc.Listener != nil) // the socket was taken before Serve
			// Run closed the listener: the socket's lock is free again.
			var again runRecord
			is.True(errors.Is(Run(context.Background(), testSpec(&again, nil), []string{"-root", root}, &stdout, &stderr), errServed))
		})
	}
}

// TestRunSecondInstance: while one instance serves, a second on the same
// root stops with sock.already_running before its Serve runs.
func TestRunSecondInstance(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := tmpRoot(t)
	serving, release := make(chan struct{}), make(chan struct{})
	var first runRecord
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), testSpec(&first, func(context.Context, *Service) error {
			close(serving)
			<-release
			return nil
		}), []string{"-root", root}, &bytes.Buffer{}, &bytes.Buffer{})
	}()
	select {
	case <-serving:
	case err := <-done:
		t.Fatalf("the first instance stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the first instance never served")
	}
	var second runRecord
	err := Run(context.Background(), testSpec(&second, nil), []string{"-root", root}, &bytes.Buffer{}, &bytes.Buffer{})
	is.Equal(wire.CodeOf(err), sock.CodeAlreadyRunning)
	is.True(second.configured) // it got as far as the socket
	is.True(!second.served)
	close(release)
	is.NoErr(<-done)
}

// TestRunServes: a Serve that completes the Service and returns its Run
// serves health on the socket Run took, until ctx ends.
func TestRunServes(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := tmpRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rec runRecord
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, testSpec(&rec, func(ctx context.Context, svc *Service) error {
			svc.Ops = []rpc.Op{Health("0123456789abcdef", time.Now(), nil)}
			return svc.Run(ctx)
		}), []string{"-root", root, "-log-level", "error"}, &bytes.Buffer{}, &bytes.Buffer{})
	}()
	c := rpc.NewClient(filepath.Join(root, "run", NameSecretd, "api.sock"), 5*time.Second)
	defer c.Close()
	var h map[string]any
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = c.Call(ctx, OpHealth, nil, &h); err == nil {
			break
		}
	}
	is.NoErr(err)
	is.Equal(h["status"], "ok")
	cancel()
	is.NoErr(<-done) // a cancelled ctx is a clean stop
}

// TestRunEnvPrefix: the environment prefix is the binary's name
// upper-cased with '-' as '_'. It sets an environment variable, so it
// does not run in parallel.
func TestRunEnvPrefix(t *testing.T) {
	is := is.New(t)
	is.Equal(envPrefix("secretd"), "SECRETD")
	is.Equal(envPrefix("containerization-helper"), "CONTAINERIZATION_HELPER")
	t.Setenv("HKTEST_RUN_TAG", "bad")
	var rec runRecord
	err := Run(context.Background(), testSpec(&rec, nil), []string{"-root", tmpRoot(t)}, &bytes.Buffer{}, &bytes.Buffer{})
	is.True(err != nil)
	is.Equal(rec.tag, "bad") // read from $HKTEST_RUN_TAG
}

func TestRunNeedsServe(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var stdout bytes.Buffer
	err := Run(context.Background(), Spec{Binary: "hktest-run", Name: NameSecretd}, []string{"-version"}, &stdout, &bytes.Buffer{})
	is.True(err != nil)
	is.Equal(stdout.Len(), 0) // refused before anything else
}
