package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"hostkit.dev/cmd/containerization-helper/internal/image/imagetest"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/wire"
)

// Environment of the test binary re-executed as a peer that asks for an
// image layout (layoutClient).
const (
	envLayout   = "HK_HELPER_TEST_LAYOUT"    // the layout path to ask for
	envLayoutOp = "HK_HELPER_TEST_LAYOUT_OP" // "evidence" (default) or "plan"
	envDigest   = "HK_HELPER_TEST_DIGEST"    // the manifest digest to ask for
)

// layoutClient is the test binary as a peer: image.evidence on layout,
// or negotiate + a create plan naming it, and print "ok" or "code: msg".
func layoutClient(ctx context.Context, c *helperapi.Client, layout, op string) int {
	ref := helperapi.ImageRef{Layout: layout, ManifestDigest: os.Getenv(envDigest)}
	var err error
	if op == "plan" || op == "plancreate" {
		var neg *helperapi.NegotiateResponse
		if neg, err = c.Negotiate(ctx, nil); err == nil {
			cx := helperapi.Context{CapabilityDigest: neg.CapabilityDigest, Fence: 1, InstanceID: "0b8e6d7a-64c5-4c1e-9a53-2f1d3c4b5a69", ProjectID: neg.ProjectID}
			var p *helperapi.PlanResponse
			p, err = c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindCreate, Context: cx, Image: &ref, Command: []string{"/bin/true"}})
			if err == nil && op == "plancreate" {
				// Planned; the test changes the layout, then says go.
				fmt.Println("planned")
				if _, rerr := bufio.NewReader(os.Stdin).ReadString('\n'); rerr != nil {
					fmt.Println("stdin:", rerr)
					return 0
				}
				_, err = c.Create(ctx, "0b8e6d7a-plancreate", &helperapi.MutationRequest{ContainerID: p.ContainerID, Context: cx, PlanHash: p.PlanHash})
			}
		}
	} else {
		_, err = c.Evidence(ctx, ref)
	}
	if err != nil {
		fmt.Println(wire.AsError(err).Error())
		return 0
	}
	fmt.Println("ok")
	return 0
}

// askAs runs exe (a copy of the test binary) as cred against the helper
// on sock, asking op for layout, and returns what it printed.
func askAs(t *testing.T, exe, sock string, cred *syscall.Credential, op string, ref helperapi.ImageRef) string {
	t.Helper()
	for attempt := 0; ; attempt++ {
		cmd := exec.Command(exe)
		cmd.Env = []string{envClient + "=" + sock, envLayout + "=" + ref.Layout, envDigest + "=" + ref.ManifestDigest, envLayoutOp + "=" + op}
		// CAP_DAC_OVERRIDE only to reach the 0700 socket directory (as in
		// TestPeerAuthentication); the helper ignores capabilities when it
		// checks what the peer may read.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, AmbientCaps: []uintptr{unix.CAP_DAC_OVERRIDE}}
		out, err := cmd.CombinedOutput()
		if errors.Is(err, syscall.ETXTBSY) && attempt < 100 { // see startPeer
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("peer: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
}

// TestLayoutReadAsPeer runs real peers of another uid against the real
// helper: image.evidence and a create plan read a layout only as far as
// the peer could read it itself, and a root-only layout answers exactly
// as a missing one; a root peer still reads the root-only layout.
func TestLayoutReadAsPeer(t *testing.T) {
	t.Parallel()
	// Layouts: one in a root-only 0700 directory, and a world-readable
	// copy under a directory every user may search.
	private := t.TempDir() // 0700, root's
	layout, d := imagetest.Build(t, private)
	at := func(l string) helperapi.ImageRef { return helperapi.ImageRef{Layout: l, ManifestDigest: d.String()} }
	open, err := os.MkdirTemp("/tmp", "hklay")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(open) })
	public := filepath.Join(open, "layout")
	if err := exec.Command("cp", "-a", layout, public).Run(); err != nil {
		t.Fatal(err)
	}
	imagetest.OpenToAll(t, open)
	exe := filepath.Join(open, "peer")
	copyFile(t, selfExe(t), exe, nil)

	h := startHelper(t, "", newRoot(t), "-allow-exe", selfExe(t), "-client-users", "0,4242")
	ctx := ctxT(t, 2*time.Minute)
	// The root peer (this process) reads the root-only layout.
	if _, err := h.client(t).Evidence(ctx, at(layout)); err != nil {
		t.Fatalf("root peer: %v\n%s", err, h.stderr.String())
	}
	if got := askAs(t, exe, h.sock, &syscall.Credential{Uid: 0, Gid: 0}, "evidence", at(layout)); got != "ok" {
		t.Fatalf("root peer process: %s", got)
	}

	other := &syscall.Credential{Uid: 4242, Gid: 4242}
	missing := filepath.Join(private, "no-such-layout")
	for _, op := range []string{"evidence", "plan"} {
		t.Run(op, func(t *testing.T) {
			want := askAs(t, exe, h.sock, other, op, at(missing))
			if !strings.HasPrefix(want, "image.not_found: ") {
				t.Fatalf("missing layout: %s\n%s", want, h.stderr.String())
			}
			if got := askAs(t, exe, h.sock, other, op, at(layout)); got != want {
				t.Fatalf("root-only layout for another uid: %q, want exactly %q", got, want)
			}
			if got := askAs(t, exe, h.sock, other, op, at(public)); got != "ok" {
				t.Fatalf("world-readable layout for another uid: %s\n%s", got, h.stderr.String())
			}
		})
	}

	// A create reads the layout as its peer too: one that became
	// unreadable between the plan and the create is refused.
	t.Run("create after the layout was closed", func(t *testing.T) {
		cmd := exec.Command(exe)
		cmd.Env = []string{envClient + "=" + h.sock, envLayout + "=" + public, envDigest + "=" + d.String(), envLayoutOp + "=plancreate"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: other, AmbientCaps: []uintptr{unix.CAP_DAC_OVERRIDE}}
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		outp, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		out := bufio.NewReader(outp)
		if line, _ := out.ReadString('\n'); line != "planned\n" {
			t.Fatalf("plan as another uid: %q\n%s", line, h.stderr.String())
		}
		blobs := filepath.Join(public, "blobs", "sha256")
		if err := os.Chmod(blobs, 0o700); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(blobs, 0o755)
		in.Write([]byte("go\n"))
		line, _ := out.ReadString('\n')
		cmd.Wait()
		if !strings.HasPrefix(line, "image.not_found: ") && !strings.HasPrefix(line, "image.blob_missing: ") {
			t.Fatalf("create of a layout closed after its plan: %q\n%s", line, h.stderr.String())
		}
	})
}
