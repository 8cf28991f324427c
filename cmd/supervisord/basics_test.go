//go:build linux

package main

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/healthapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
)

var osGetpid = os.Getpid

func TestRuntimeNotImplementedWhenNotEnabled(t *testing.T) {
	e := start(t)
	_, err := e.c.Provision(context.Background(), &api.ProvisionRequest{Command: []string{"true"}, WorkingDir: "/tmp", Start: true})
	code(t, err, api.CodeRuntimeNotImplemented)
	h, err := healthapi.GetAll(context.Background(), e.rc)
	is.New(t).NoErr(err)
	is.New(t).Equal(h["host_runtime_enabled"], false)
}

func TestProvisionRefusals(t *testing.T) {
	e := start(t, "-host-runtime-enabled", "1")
	for _, tc := range []struct {
		name string
		req  api.ProvisionRequest
		code string
	}{
		{"working_dir.not_found", api.ProvisionRequest{Command: []string{"true"}, WorkingDir: "/nonexistent/dir"}, api.CodeWorkingDirNotFound},
		{"working dir is a file", api.ProvisionRequest{Command: []string{"true"}, WorkingDir: "/etc/hostname"}, api.CodeWorkingDirNotFound},
		{"invalid id", api.ProvisionRequest{Command: []string{"true"}, WorkingDir: "/tmp", InstanceID: "../x"}, api.CodeInstanceInvalidID},
		{"container never runs on the host", api.ProvisionRequest{Command: []string{"true"}, Runtime: "container"}, api.CodeRuntimeUnavailable},
		{"credentials without egress", api.ProvisionRequest{Command: []string{"true"}, WorkingDir: "/tmp", Credentials: []api.CredentialSpec{{Credential: "c", Env: "TOKEN"}}}, api.CodeCredentialsUnavailable},
		{"no command", api.ProvisionRequest{WorkingDir: "/tmp"}, api.CodeInstanceInvalid},
		{"stop timeout too long", api.ProvisionRequest{Command: []string{"true"}, WorkingDir: "/tmp", StopTimeoutMS: 301_000}, api.CodeInstanceInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.c.Provision(context.Background(), &tc.req)
			code(t, err, tc.code)
		})
	}
	_, err := e.c.Status(context.Background(), api.NewID())
	code(t, err, api.CodeInstanceNotFound)
}

// TestConcurrentProvisionOfOneID guards against two provisions of one id
// both acting: the same request answers the same instance (one agent), a
// different one is instance.conflict.
func TestConcurrentProvisionOfOneID(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "true")
	id := api.NewID()
	req := api.ProvisionRequest{InstanceID: strings.ToUpper(id), Command: []string{"sleep", "1000"}, WorkingDir: "/tmp", Start: true, StopTimeoutMS: 1000}
	var wg sync.WaitGroup
	pids := make([]int64, 10)
	for i := range pids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req
			in, err := e.c.Provision(context.Background(), &r)
			if err == nil {
				pids[i] = in.PID
			}
		}()
	}
	wg.Wait()
	for _, p := range pids {
		is.Equal(p, pids[0])
	}
	is.True(pids[0] > 0)
	is.Equal(len(treeOf(id)), 1)
	other := req
	other.Command = []string{"sleep", "1001"}
	_, err := e.c.Provision(context.Background(), &other)
	code(t, err, api.CodeInstanceConflict)
	is.NoErr(e.c.Destroy(context.Background(), id))
	_, err = os.Stat(e.root + "/state/supervisord/instances/" + id)
	is.True(os.IsNotExist(err))
}

// TestManyInstancesConcurrently provisions and destroys 100 instances at
// once (each with its own network and mount namespaces, the default):
// every one succeeds. It asserts no time: on a loaded 2-core machine the
// kernel's namespace work alone can take minutes, so its client waits up
// to 10 minutes per call where the shared one gives up after 30 s.
func TestManyInstancesConcurrently(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	rc := rpc.NewClient(e.sock(), 10*time.Minute)
	t.Cleanup(func() { rc.Close() })
	c := api.NewClient(rc)
	t0 := time.Now()
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = api.NewID()
	}
	// A failure must not leave agents behind: a provision whose answer
	// came too late for the test may still have finished, and List would
	// not have shown it to the clean-up of start. Destroy waits for the
	// instance's lock, so it follows any provision still under way.
	t.Cleanup(func() {
		for _, id := range ids {
			c.Destroy(context.Background(), id)
		}
	})
	errs := make(chan error, 200)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Provision(context.Background(), &api.ProvisionRequest{InstanceID: ids[i], Command: []string{"sleep", "1000"}, WorkingDir: "/tmp", Start: true, StopTimeoutMS: 1000})
			errs <- err
		}()
	}
	wg.Wait()
	l, err := c.List(context.Background())
	is.NoErr(err)
	is.Equal(len(l.Instances), 100)
	for i := range ids {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- c.Destroy(context.Background(), ids[i]) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		is.NoErr(err)
	}
	for _, id := range ids {
		is.Equal(len(treeOf(id)), 0)
	}
	t.Logf("100 instances provisioned and destroyed in %s", time.Since(t0))
}
