//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

var (
	ctx    = context.Background()
	canary = []byte("CANARY-secretd-e2e-3b9f0c5a71")
)

func putCanary(t *testing.T, d *proc, name string, targets ...secretdapi.TargetSpec) {
	t.Helper()
	if len(targets) == 0 {
		targets = []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}}
	}
	_, err := d.api.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: name, Value: bytes.Clone(canary),
		Destinations: []string{"https://api.example.com"}, Targets: targets}, "")
	if err != nil {
		t.Fatal(err)
	}
}

func TestRestartGivesStaleEpoch(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := newRoot(t)
	d := startDaemon(t, root, nil)
	putCanary(t, d, "github")
	st, err := d.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "github", Invocation: "inv-1"})
	is.NoErr(err)
	d.stop(t)

	d2 := startDaemon(t, root, nil)
	_, err = d2.api.LeaseConsume(ctx, "inv-1", [][]byte{st.Handle})
	is.Equal(wire.CodeOf(err), secretdapi.CodeLeaseStaleEpoch)
	_, err = d2.api.LeaseLookup(ctx, st.Handle)
	is.Equal(wire.CodeOf(err), secretdapi.CodeLeaseStaleEpoch)
	list, err := d2.api.CredentialList(ctx)
	is.NoErr(err)
	is.Equal(len(list.Credentials), 1) // credentials persist, leases do not
	is.Equal(list.Credentials[0].Name, "github")
	fi, err := os.Stat(filepath.Join(root, "state", "secretd", "credentials", "github.cred"))
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o600))
}

// TestOtherUIDDenied: every op from a uid without a role is peer.denied.
func TestOtherUIDDenied(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	d := startDaemon(t, newRoot(t), nil, "-socket-group", "65533")
	putCanary(t, d, "github")
	st, err := d.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "github", Invocation: "inv-1"})
	is.NoErr(err)
	res := runChild(t, d.socket(), st.Handle)
	is.Equal(res["uid"], "65533")
	for _, op := range []string{"health", secretdapi.OpCredentialPut, secretdapi.OpCredentialDelete, secretdapi.OpCredentialList,
		secretdapi.OpLeaseStage, secretdapi.OpLeaseConsume, secretdapi.OpLeaseLookup, secretdapi.OpLeaseRevoke, secretdapi.OpLeaseList} {
		is.Equal(res[op], wire.CodePeerDenied) // op from another uid
	}
	// The lease is untouched and the credential unchanged.
	out, err := d.api.LeaseConsume(ctx, "inv-1", [][]byte{st.Handle})
	is.NoErr(err)
	is.Equal(out.Leases[0].Value, canary)
	d.stop(t)
	is.True(bytes.Contains(d.auditBytes(t), []byte(`"uid":65533`))) // denials are audited with the peer
}

// TestCanaryThroughEveryErrorPath drives a canary value through every
// error path and checks it appears nowhere but in a successful consume.
func TestCanaryThroughEveryErrorPath(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := newRoot(t)
	d := startDaemon(t, root, nil, "-socket-group", "65533", "-sweep-interval", "100ms")
	putCanary(t, d, "github")
	var answers [][]byte // everything a caller saw on failure
	var handles [][]byte
	fail := func(err error, code string) {
		t.Helper()
		is.Equal(wire.CodeOf(err), code)
		answers = append(answers, []byte(err.Error()))
	}
	stage := func(ttl int64) []byte {
		st, err := d.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "github", Invocation: "inv-1", TTLMS: ttl})
		is.NoErr(err)
		handles = append(handles, st.Handle)
		return st.Handle
	}

	// Bad frame, and a frame over the 8 MiB limit, on raw connections.
	answers = append(answers, rawExchange(t, d.socket(), append([]byte{0xc1}, canary...)))
	answers = append(answers, rawHeader(t, d.socket(), 9<<20))
	// Wrong type: the value as str instead of bin.
	fail(d.raw.Call(ctx, secretdapi.OpCredentialPut, map[string]any{"name": "wt", "value": string(canary),
		"destinations": []string{"https://api.example.com"}, "targets": []map[string]any{{"target": "query:k"}}}, nil), wire.CodeFrameMalformed)
	// Oversize value.
	_, err := d.api.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: "big", Value: bytes.Repeat(canary, 3000),
		Destinations: []string{"https://api.example.com"}, Targets: []secretdapi.TargetSpec{{Target: "query:k"}}}, "")
	fail(err, secretdapi.CodeCredentialInvalid)
	// A caller-supplied value in lease.stage.
	fail(d.raw.Call(ctx, secretdapi.OpLeaseStage, map[string]any{"credential": "github", "invocation": "inv-1", "value": canary}, nil), wire.CodeRequestUnknownField)
	// Expired (1 s TTL on the real clock).
	old := stage(1000)
	time.Sleep(1100 * time.Millisecond)
	_, err = d.api.LeaseConsume(ctx, "inv-1", [][]byte{old})
	fail(err, secretdapi.CodeLeaseExpired)
	// Duplicate, wrong invocation, batch with a bogus handle.
	h := stage(0)
	_, err = d.api.LeaseConsume(ctx, "inv-1", [][]byte{h, h})
	fail(err, secretdapi.CodeLeaseDuplicate)
	_, err = d.api.LeaseConsume(ctx, "inv-2", [][]byte{h})
	fail(err, secretdapi.CodeLeaseWrongInvocation)
	_, err = d.api.LeaseConsume(ctx, "inv-1", [][]byte{h, []byte("bogus")})
	fail(err, secretdapi.CodeLeaseInvalidHandle)
	// Denied: another uid tries every op, consume included.
	res := runChild(t, d.socket(), h)
	is.Equal(res[secretdapi.OpLeaseConsume], wire.CodePeerDenied)
	// Internal error: the store cannot be written.
	credDir := filepath.Join(root, "state", "secretd", "credentials")
	is.NoErr(os.Rename(credDir, credDir+".away"))
	is.NoErr(os.WriteFile(credDir, []byte("not a directory"), 0o600))
	_, err = d.api.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: "broken", Value: bytes.Clone(canary),
		Destinations: []string{"https://api.example.com"}, Targets: []secretdapi.TargetSpec{{Target: "query:k"}}}, "")
	fail(err, wire.CodeInternal)
	is.NoErr(os.Remove(credDir))
	is.NoErr(os.Rename(credDir+".away", credDir))

	// The one place the value may appear: a successful consume.
	out, err := d.api.LeaseConsume(ctx, "inv-1", [][]byte{h})
	is.NoErr(err)
	is.Equal(out.Leases[0].Value, canary)
	_, err = d.api.LeaseConsume(ctx, "inv-1", [][]byte{h}) // reuse
	fail(err, secretdapi.CodeLeaseConsumed)
	_, err = d.api.LeaseLookup(ctx, h)
	fail(err, secretdapi.CodeLeaseConsumed)
	d.stop(t)

	logs, audit := d.stderr.Bytes(), d.auditBytes(t)
	is.True(bytes.Contains(audit, []byte(`"op":"lease.reuse_attempt"`)))
	is.True(bytes.Contains(audit, []byte(`"code":"internal"`)))
	is.True(bytes.Contains(logs, []byte("rpc.handler_error"))) // the internal error was logged
	for name, out := range map[string][]byte{"stderr": logs, "audit": audit, "answers": bytes.Join(answers, []byte("\n"))} {
		for _, secret := range append([][]byte{canary}, handles...) {
			for _, form := range forms(secret) {
				if bytes.Contains(out, []byte(form)) {
					t.Errorf("%s contains secret material (%d bytes, form %q...)", name, len(secret), form[:4])
				}
			}
		}
	}
}

// forms returns the raw, hex and base64 spellings of b.
func forms(b []byte) []string {
	return []string{string(b), hex.EncodeToString(b), base64.StdEncoding.EncodeToString(b),
		base64.RawStdEncoding.EncodeToString(b), base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b)}
}

// rawExchange sends payload as one frame and returns the raw answer.
func rawExchange(t *testing.T, socket string, payload []byte) []byte {
	t.Helper()
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	return rawSend(t, socket, append(frame, payload...))
}

// rawHeader sends only a frame header announcing n bytes.
func rawHeader(t *testing.T, socket string, n uint32) []byte {
	t.Helper()
	return rawSend(t, socket, binary.BigEndian.AppendUint32(nil, n))
}

func rawSend(t *testing.T, socket string, b []byte) []byte {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	p, err := wire.ReadFrame(c, 0)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	resp, err := wire.DecodeResponse(p, wire.Limits{})
	if err != nil || resp.OK || resp.Err == nil {
		t.Fatalf("want an error answer, got %+v (%v)", resp, err)
	}
	return p
}

// TestCredentialsDirectory imports credentials laid out as systemd does.
func TestCredentialsDirectory(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	credDir := filepath.Join(newRoot(t), "credentials", "secretd.service")
	is.NoErr(os.MkdirAll(credDir, 0o700))
	for name, content := range map[string]string{
		"hostkit-credentials.json": `{"version":1,"credentials":[{"name":"github","file":"gh-token","strip_newline":true,
			"destinations":["https://api.github.com"],"targets":[{"target":"header:Authorization","template":"Bearer {}"}]}]}`,
		"gh-token": string(canary) + "\n",
	} {
		is.NoErr(os.WriteFile(filepath.Join(credDir, name), []byte(content), 0o400))
	}
	is.NoErr(os.Chmod(credDir, 0o500))
	d := startDaemon(t, newRoot(t), []string{"CREDENTIALS_DIRECTORY=" + credDir})
	list, err := d.api.CredentialList(ctx)
	is.NoErr(err)
	is.Equal(len(list.Credentials), 1)
	is.Equal(list.Credentials[0].Source, "systemd")
	_, err = d.api.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: "github", Value: []byte("x"),
		Destinations: []string{"https://api.github.com"}, Targets: []secretdapi.TargetSpec{{Target: "query:k"}}}, "")
	is.Equal(wire.CodeOf(err), secretdapi.CodeCredentialReadOnly)
	is.Equal(wire.CodeOf(d.api.CredentialDelete(ctx, "github")), secretdapi.CodeCredentialReadOnly)
	st, err := d.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "github", Invocation: "inv-1"})
	is.NoErr(err)
	out, err := d.api.LeaseConsume(ctx, "inv-1", [][]byte{st.Handle})
	is.NoErr(err)
	is.Equal(out.Leases[0].Value, canary)
	is.Equal(out.Leases[0].Template, "Bearer {}")
}

// TestConcurrentConsumeOverSocket: 64 clients race for one handle per
// round over the real socket; exactly one wins.
func TestConcurrentConsumeOverSocket(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, newRoot(t), nil)
	putCanary(t, d, "github")
	const workers, rounds = 64, 30
	clients := make([]*secretdapi.Client, workers)
	for i := range clients {
		c := rpc.NewClient(d.socket(), 10*time.Second)
		t.Cleanup(func() { c.Close() })
		clients[i] = secretdapi.NewClient(c)
	}
	for round := range rounds {
		st, err := d.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "github", Invocation: "inv-race"})
		if err != nil {
			t.Fatal(err)
		}
		var wins, consumed atomic.Int32
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := c.LeaseConsume(ctx, "inv-race", [][]byte{st.Handle})
				switch {
				case err == nil && bytes.Equal(out.Leases[0].Value, canary):
					wins.Add(1)
				case wire.HasCode(err, secretdapi.CodeLeaseConsumed):
					consumed.Add(1)
				default:
					t.Errorf("round %d: %v", round, err)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 || consumed.Load() != workers-1 {
			t.Fatalf("round %d: %d wins, %d consumed", round, wins.Load(), consumed.Load())
		}
	}
}

func TestHealthCountsLeases(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	d := startDaemon(t, newRoot(t), nil)
	putCanary(t, d, "github")
	for range 3 {
		_, err := d.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "github", Invocation: "inv-h"})
		is.NoErr(err)
	}
	h, err := healthapi.GetAll(ctx, d.raw)
	is.NoErr(err)
	is.Equal(h["status"], "ok")
	is.Equal(toInt(h["leases"]), 3)
	is.Equal(toInt(h["credentials"]), 1)
	r, err := d.api.LeaseRevoke(ctx, "inv-h")
	is.NoErr(err)
	is.Equal(r.Revoked, 3)
	h, _ = healthapi.GetAll(ctx, d.raw)
	is.Equal(toInt(h["leases"]), 0)
}

func toInt(v any) int {
	switch x := v.(type) {
	case int8:
		return int(x)
	case uint8:
		return int(x)
	case int64:
		return int(x)
	case uint64:
		return int(x)
	}
	return -1
}
