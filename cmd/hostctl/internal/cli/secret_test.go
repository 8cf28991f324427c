package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

const secretCanary = "CANARY-hostctl-secret-0c7d21"

// runCLIStdin runs hostctl in-process with stdin.
func runCLIStdin(stdin string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestSecretAndLeaseCommands(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := shortRoot(t)
	p := startDaemon(t, "secretd", "secretd", root)
	ctx := context.Background()

	code, out, errOut := runCLIStdin(secretCanary+"\n", "-root", root, "secret", "put", "github", "--from-stdin",
		"--allow", "https://api.github.com", "--target", "header:Authorization", "--template", "Bearer {}", "--overwrite")
	is.Equal(code, 0) // put from stdin
	is.True(strings.Contains(out, "stored github (version 1)"))
	is.Equal(errOut, "")

	file := filepath.Join(t.TempDir(), "token")
	is.NoErr(os.WriteFile(file, []byte(secretCanary+"-file\n"), 0o600))
	code, _, errOut = runCLI("-root", root, "secret", "put", "other", "--from-file", file, "--keep-newline",
		"--allow", "https://a.example", "--allow", "https://b.example", "--target", "query:key", "--target", "body:/auth")
	is.Equal(code, 0) // put from file
	is.Equal(errOut, "")

	code, out, _ = runCLI("-root", root, "secret", "list")
	is.Equal(code, 0)
	is.True(strings.Contains(out, "NAME"))
	is.True(strings.Contains(out, "https://a.example,https://b.example"))
	code, out, _ = runCLI("-root", root, "--json", "secret", "list")
	is.Equal(code, 0)
	var list struct {
		Credentials []credentialJSON `json:"credentials"`
	}
	is.NoErr(json.Unmarshal([]byte(out), &list))
	is.Equal(len(list.Credentials), 2)
	is.Equal(list.Credentials[0].Targets[0], targetJSON{Target: "header:Authorization", Template: "Bearer {}", Overwrite: true})
	is.True(!strings.Contains(out, secretCanary))

	// Stage and consume through the API: the value went in without its
	// newline (stdin) and with it (--keep-newline).
	api := secretdapi.NewClient(rpc.NewClient(p.socket, 5*time.Second))
	st, err := api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "github", Invocation: "inv-1"})
	is.NoErr(err)
	st2, err := api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "other", Invocation: "inv-1", Destination: "https://b.example", Target: "query:key"})
	is.NoErr(err)

	code, out, _ = runCLI("-root", root, "lease", "list", "--invocation", "inv-1", "--json")
	is.Equal(code, 0)
	var leases struct {
		Leases []leaseJSON `json:"leases"`
	}
	is.NoErr(json.Unmarshal([]byte(out), &leases))
	is.Equal(len(leases.Leases), 2)
	is.True(!strings.Contains(out, secretCanary))
	code, out, _ = runCLI("-root", root, "lease", "list")
	is.Equal(code, 0)
	is.True(strings.Contains(out, "HANDLE_FP"))

	got, err := api.LeaseConsume(ctx, "inv-1", [][]byte{st.Handle})
	is.NoErr(err)
	is.Equal(string(got.Leases[0].Value), secretCanary)
	is.True(got.Leases[0].Overwrite)
	code, out, _ = runCLI("-root", root, "lease", "revoke", "--invocation", "inv-1")
	is.Equal(code, 0)
	is.True(strings.Contains(out, "revoked 1 lease(s) of inv-1"))
	_, err = api.LeaseConsume(ctx, "inv-1", [][]byte{st2.Handle})
	is.Equal(wire.CodeOf(err), secretdapi.CodeLeaseNotFound)

	code, _, _ = runCLI("-root", root, "secret", "delete", "other")
	is.Equal(code, 0)
	code, _, errOut = runCLI("-root", root, "secret", "delete", "other")
	is.Equal(code, ExitNotFound)
	is.True(strings.Contains(errOut, "credential.not_found"))
}

// A value is never taken from the command line, and bad usage exits 2
// without contacting secretd.
func TestSecretPutUsage(t *testing.T) {
	t.Parallel()
	root := shortRoot(t)
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"value as argument", []string{"secret", "put", "github", secretCanary, "--from-stdin", "--allow", "https://a.example", "--target", "query:k"}},
		{"no source", []string{"secret", "put", "github", "--allow", "https://a.example", "--target", "query:k"}},
		{"both sources", []string{"secret", "put", "github", "--from-stdin", "--from-file", "/dev/null", "--allow", "https://a.example", "--target", "query:k"}},
		{"no name", []string{"secret", "put"}},
		{"no allow", []string{"secret", "put", "github", "--from-stdin", "--target", "query:k"}},
		{"revoke without invocation", []string{"lease", "revoke"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			code, out, errOut := runCLIStdin(secretCanary, append([]string{"-root", root}, tt.args...)...)
			is.Equal(code, ExitUsage)
			is.True(!strings.Contains(out+errOut, secretCanary))
		})
	}
	is := is.New(t)
	code, _, errOut := runCLIStdin("", "-root", root, "secret", "put", "x", "--from-stdin", "--allow", "https://a.example", "--target", "query:k")
	is.Equal(code, ExitUsage) // empty value
	is.True(strings.Contains(errOut, "1..65536"))
	code, _, _ = runCLI("-root", root, "secret", "list")
	is.Equal(code, ExitUnavailable) // no secretd under this root
}
