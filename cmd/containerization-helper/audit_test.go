package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/wire"
)

// Every mutation leaves a before/after pair, done or refused, linked by
// before_seq, in a chain that verifies; reads leave one record each.
func TestAuditPairs(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h, s, img := helperSession(t)
	ctx := ctxT(t, 2*time.Minute)

	c := s.create(t, img, trapTerm, []string{"PATH=/bin"}, true)
	_, err := s.c.Start(ctx, newIdem(t), &helperapi.MutationRequest{ContainerID: c.ContainerID, Context: s.cx, PlanHash: "sha256:" + strings.Repeat("0", 64)})
	is.Equal(wire.CodeOf(err), "plan.unknown") // refused before it acted
	s.forceDelete(t, c.ContainerID)

	type rec struct {
		Seq     uint64         `json:"seq"`
		Op      string         `json:"op"`
		Phase   string         `json:"phase"`
		Outcome string         `json:"outcome"`
		Code    string         `json:"code"`
		Fields  map[string]any `json:"fields"`
	}
	befores := map[uint64]rec{}
	pairs := map[string]int{} // op/outcome → completed pairs
	for _, line := range strings.Split(strings.TrimSpace(h.auditText(t)), "\n") {
		var r rec
		is.NoErr(json.Unmarshal([]byte(line), &r))
		switch r.Phase {
		case "before":
			is.Equal(r.Outcome, "pending")
			befores[r.Seq] = r
		case "after":
			bs, _ := r.Fields["before_seq"].(float64)
			b, ok := befores[uint64(bs)]
			if !ok {
				t.Fatalf("after record without its before: %s", line)
			}
			is.Equal(b.Op, r.Op)
			delete(befores, uint64(bs))
			pairs[r.Op+"/"+r.Outcome]++
		}
	}
	is.Equal(len(befores), 0) // no pair left open
	is.Equal(pairs[helperapi.OpCreate+"/ok"], 1)
	is.Equal(pairs[helperapi.OpStart+"/ok"], 1)
	is.Equal(pairs[helperapi.OpStart+"/error"], 1)
	is.Equal(pairs[helperapi.OpDelete+"/ok"], 1)
	rep, err := audit.Verify(filepath.Join(h.root, "log", "helper"), "audit.jsonl")
	is.NoErr(err)
	is.True(rep.Records >= 8)
}

// A mutation whose caller gives up (its deadline passes mid-stop) still
// gets its after record: the op may have acted.
func TestAuditAfterCallerGaveUp(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h, s, img := helperSession(t)
	// exec sleep: the init ignores SIGTERM, so the stop waits its timeout.
	c := s.create(t, img, []string{"/bin/sh", "-c", "exec sleep 600"}, []string{"PATH=/bin"}, true)
	p, err := s.c.Plan(ctxT(t, time.Minute), &helperapi.PlanRequest{Kind: helperapi.KindDelete, ContainerID: c.ContainerID, Context: s.cx, Force: true, StopTimeoutMS: 5000})
	is.NoErr(err)
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = s.c.Delete(short, newIdem(t), &helperapi.MutationRequest{ContainerID: c.ContainerID, Context: s.cx, PlanHash: p.PlanHash})
	is.True(err != nil) // the caller gave up before the stop timeout
	deadline := time.Now().Add(20 * time.Second)
	for {
		text := h.auditText(t)
		if strings.Contains(text, `"op":"container.delete","phase":"after"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no after record for the abandoned delete:\n%s", text)
		}
		time.Sleep(50 * time.Millisecond)
	}
	is.True(!strings.Contains(h.stderr.String(), "audit.append_failed"))
}
