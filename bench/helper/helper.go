//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/rpc"
)

// helperProc is the running helper and a client with one instance's
// mutation context.
type helperProc struct {
	root string
	cmd  *exec.Cmd
	c    *helperapi.Client
	rc   *rpc.Client
	cx   helperapi.Context
}

// startHelper starts bin under -root root with this executable on its
// allowlist (and extra flags), waits for it, and negotiates.
func startHelper(ctx context.Context, bin, root string, verbose bool, extra ...string) (*helperProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	level := "warn"
	if verbose {
		level = "info"
	}
	cmd := exec.Command(bin, append([]string{"-root", root, "-allow-exe", self, "-idle-timeout", "0", "-log-level", level, "-runtime", "runc"}, extra...)...)
	logf, err := os.Create(filepath.Join(filepath.Dir(root), "helper.log")) // its log lines, kept out of the figures
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own copy
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	h := &helperProc{root: root, cmd: cmd}
	h.rc = rpc.NewClient(filepath.Join(root, "run", "helper", "api.sock"), time.Minute)
	h.c = helperapi.NewClient(h.rc)
	var neg *helperapi.NegotiateResponse
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if neg, err = h.c.Negotiate(ctx, nil); err == nil {
			break
		}
		if time.Now().After(deadline) {
			h.stop()
			return nil, fmt.Errorf("helper did not answer: %w", err)
		}
	}
	h.cx = helperapi.Context{CapabilityDigest: neg.CapabilityDigest, Fence: 1, InstanceID: uuid(), ProjectID: neg.ProjectID}
	return h, nil
}

// stop ends the helper (SIGTERM) and waits for it.
func (h *helperProc) stop() {
	h.rc.Close()
	h.cmd.Process.Signal(syscall.SIGTERM)
	h.cmd.Wait()
}

// stateDir is the helper's state directory.
func (h *helperProc) stateDir() string { return filepath.Join(h.root, "state", "helper") }

// create plans and creates a container running cmd; it is left created.
func (h *helperProc) create(ctx context.Context, img image, cmd ...string) (string, error) {
	p, err := h.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindCreate, Context: h.cx,
		Image: &helperapi.ImageRef{Layout: img.layout, ManifestDigest: img.manifest}, Command: cmd})
	if err != nil {
		return "", fmt.Errorf("plan create: %w", err)
	}
	if _, err := h.c.Create(ctx, uuid(), &helperapi.MutationRequest{ContainerID: p.ContainerID, Context: h.cx, PlanHash: p.PlanHash}); err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	return p.ContainerID, nil
}

// start plans and starts id, and returns its init's pid.
func (h *helperProc) start(ctx context.Context, id string) (int, error) {
	p, err := h.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindStart, ContainerID: id, Context: h.cx})
	if err != nil {
		return 0, fmt.Errorf("plan start: %w", err)
	}
	c, err := h.c.Start(ctx, uuid(), &helperapi.MutationRequest{ContainerID: id, Context: h.cx, PlanHash: p.PlanHash})
	if err != nil {
		return 0, err
	}
	return int(c.Pid), nil
}

// delete plans a forced delete of id and carries it out.
func (h *helperProc) delete(ctx context.Context, id string) error {
	p, err := h.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindDelete, ContainerID: id, Context: h.cx, Force: true})
	if err != nil {
		return fmt.Errorf("plan delete: %w", err)
	}
	_, err = h.c.Delete(ctx, uuid(), &helperapi.MutationRequest{ContainerID: id, Context: h.cx, PlanHash: p.PlanHash})
	return err
}

// cycle is plan+create, plan+start, plan+delete (force) of one container,
// and returns their time (not the wait for the init to be ready, waitReady,
// between start and delete). With trace, it prints the time of each part.
func (h *helperProc) cycle(ctx context.Context, img image, trace bool) (time.Duration, error) {
	t0 := time.Now()
	id, err := h.create(ctx, img, benchCmd...)
	if err != nil {
		return 0, err
	}
	t1 := time.Now()
	pid, err := h.start(ctx, id)
	if err != nil {
		return 0, err
	}
	t2 := time.Now()
	if err := waitReady(ctx, pid); err != nil {
		return 0, err
	}
	t3 := time.Now()
	err = h.delete(ctx, id)
	t4 := time.Now()
	if trace {
		fmt.Printf("    helper cycle: create %s start %s delete %s\n", ms(t1.Sub(t0)), ms(t2.Sub(t1)), ms(t4.Sub(t3)))
	}
	return t2.Sub(t0) + t4.Sub(t3), err
}

// uuid is a random version 4 UUID (instance ids, idempotency keys).
func uuid() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}
