package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/lib/api/secretdapi"
	api "hostkit.dev/lib/api/supervisordapi"
)

// TestParseCreds: --credential NAME=ENV[,target=T][,destination=O] picks
// one target and destination of a credential that has several; a comma
// inside a value stays in it; a repeated, unknown or empty option is a
// usage error.
func TestParseCreds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
		want api.CredentialSpec
		ok   bool
	}{
		{"name and env", "gh=GH_TOKEN", api.CredentialSpec{Credential: "gh", Env: "GH_TOKEN"}, true},
		{"target", "gh=GH,target=basic:password", api.CredentialSpec{Credential: "gh", Env: "GH", Target: "basic:password"}, true},
		{"destination", "gh=GH,destination=https://api.github.com", api.CredentialSpec{Credential: "gh", Env: "GH", Destination: "https://api.github.com"}, true},
		{"both, either order", "gh=GH,destination=https://a.example,target=header:X-Api-Key",
			api.CredentialSpec{Credential: "gh", Env: "GH", Target: "header:X-Api-Key", Destination: "https://a.example"}, true},
		{"a comma inside the target", "k=K,target=body:/a,b,destination=https://a.example",
			api.CredentialSpec{Credential: "k", Env: "K", Target: "body:/a,b", Destination: "https://a.example"}, true},
		{"no env", "gh", api.CredentialSpec{}, false},
		{"empty env", "gh=,target=query:k", api.CredentialSpec{}, false},
		{"unknown option", "gh=GH,template=x", api.CredentialSpec{}, false},
		{"target twice", "gh=GH,target=query:a,target=query:b", api.CredentialSpec{}, false},
		{"empty target", "gh=GH,target=", api.CredentialSpec{}, false},
		{"empty destination", "gh=GH,destination=", api.CredentialSpec{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, err := parseCreds([]string{tc.in})
			if !tc.ok {
				_, usage := err.(usageError)
				is.True(usage)
				is.True(strings.Contains(err.Error(), "NAME=ENV[,target=T][,destination=O]"))
				return
			}
			is.NoErr(err)
			is.Equal(got, []api.CredentialSpec{tc.want})
		})
	}
}

// TestTargetSpecs: a header target's own template (after '=') wins over
// --template; --overwrite goes to header targets, --basic-user to
// basic:password; a flag that applies to no target is a usage error.
func TestTargetSpecs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		targets   []string
		template  string
		overwrite bool
		basicUser string
		want      []secretdapi.TargetSpec
	}{
		{"own template", []string{"header:X-Api-Key={}", "header:Authorization=Bearer {}"}, "", false, "",
			[]secretdapi.TargetSpec{{Target: "header:X-Api-Key", Template: "{}"}, {Target: "header:Authorization", Template: "Bearer {}"}}},
		{"own template wins", []string{"header:Authorization=Token {}", "header:X-Key"}, "Bearer {}", true, "",
			[]secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Token {}", Overwrite: true}, {Target: "header:X-Key", Template: "Bearer {}", Overwrite: true}}},
		{"a '=' in a query target is its name's", []string{"query:a=b"}, "", false, "", []secretdapi.TargetSpec{{Target: "query:a=b"}}},
		{"basic", []string{"basic:password", "basic:user"}, "", false, "x-access-token",
			[]secretdapi.TargetSpec{{Target: "basic:password", BasicUser: "x-access-token"}, {Target: "basic:user"}}},
		{"template without a header", []string{"query:k"}, "Bearer {}", false, "", nil},
		{"template, every header has its own", []string{"header:A={}"}, "Bearer {}", false, "", nil},
		{"overwrite without a header", []string{"basic:password"}, "", true, "", nil},
		{"basic user without basic:password", []string{"basic:user"}, "", false, "u", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, err := targetSpecs(tc.targets, tc.template, tc.overwrite, tc.basicUser)
			if tc.want == nil {
				_, usage := err.(usageError)
				is.True(usage)
				return
			}
			is.NoErr(err)
			is.Equal(got, tc.want)
		})
	}
}

// TestProvisionCredentialTargets: with the real secretd, egressd and
// supervisord, a credential stored with a template per header target and
// a Basic target (fixed user-id) is provisioned twice into one agent, one
// lease per target and destination named on --credential; secretd's
// audit shows each lease staged for what was asked, and the agent holds
// two placeholders. Without target and destination the same credential
// is ambiguous, and a target it does not allow is refused: nothing
// starts.
func TestProvisionCredentialTargets(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := shortRoot(t)
	os.Chmod(root, 0o755)
	startDaemon(t, "secretd", "secretd", root)
	startDaemon(t, "egressd", "egressd", root)
	startDaemon(t, "supervisord", "supervisord", root, "-host-runtime-enabled", "yes")
	t.Cleanup(func() {
		_, out, _ := runCLI("-root", root, "--json", "instance", "list")
		var l struct {
			Instances []instanceJSON `json:"instances"`
		}
		json.Unmarshal([]byte(out), &l)
		for _, in := range l.Instances {
			runCLI("-root", root, "instance", "destroy", in.InstanceID)
		}
	})

	code, _, errOut := runCLIStdin(secretCanary+"\n", "-root", root, "secret", "put", "multi", "--from-stdin",
		"--allow", "https://a.example", "--allow", "https://git.example",
		"--target", "header:X-Api-Key={}", "--target", "header:Authorization=Bearer {}",
		"--target", "basic:password", "--basic-user", "x-access-token")
	is.Equal(code, 0) // secret put with a template per target
	is.Equal(errOut, "")
	code, out, _ := runCLI("-root", root, "--json", "secret", "list")
	is.Equal(code, 0)
	var list struct {
		Credentials []credentialJSON `json:"credentials"`
	}
	is.NoErr(json.Unmarshal([]byte(out), &list))
	is.Equal(list.Credentials[0].Targets, []targetJSON{{Target: "basic:password", BasicUser: "x-access-token"},
		{Target: "header:Authorization", Template: "Bearer {}"}, {Target: "header:X-Api-Key", Template: "{}"}})

	in := provisionJSON(t, root, "--credential", "multi=API_KEY,target=header:X-Api-Key,destination=https://a.example",
		"--credential", "multi=GIT_PASSWORD,target=basic:password,destination=https://git.example",
		"--", "sh", "-c", `echo "key=$API_KEY pw=$GIT_PASSWORD"; exec sleep 1000`)
	is.Equal(in.State, api.StateRunning)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, out, _ = runCLI("-root", root, "instance", "logs", in.InstanceID); strings.Contains(out, "pw=") {
			break
		}
	}
	var key, pw string
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "key="); ok {
			key = v
		}
		if v, ok := strings.CutPrefix(f, "pw="); ok {
			pw = v
		}
	}
	is.True(strings.HasPrefix(key, "hkp_") && strings.HasPrefix(pw, "hkp_") && key != pw) // two placeholders
	is.True(!strings.Contains(out, secretCanary))
	auditLog, err := os.ReadFile(filepath.Join(root, "log", "secretd", "audit.jsonl"))
	is.NoErr(err)
	var staged []string
	for _, line := range strings.Split(string(auditLog), "\n") {
		var rec struct {
			Op     string         `json:"op"`
			Fields map[string]any `json:"fields"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Op == secretdapi.OpLeaseStage && rec.Fields["target"] != nil {
			staged = append(staged, rec.Fields["target"].(string)+" "+rec.Fields["destination"].(string))
		}
	}
	is.Equal(len(staged), 2)
	is.True(strings.Contains(strings.Join(staged, ";"), "header:X-Api-Key https://a.example"))
	is.True(strings.Contains(strings.Join(staged, ";"), "basic:password https://git.example"))

	for _, tc := range []struct{ name, spec, msg string }{
		{"ambiguous", "multi=K", "lease.ambiguous"},
		{"target not allowed", "multi=K,target=query:key,destination=https://a.example", "lease.target_not_allowed"},
		{"destination not allowed", "multi=K,target=basic:password,destination=https://evil.example", "lease.destination_not_allowed"},
	} {
		code, _, errOut := runCLI("-root", root, "instance", "provision", "--working-dir", "/tmp", "--credential", tc.spec, "--", "true")
		is.Equal(code, ExitFailure) // tc.name
		is.True(strings.Contains(errOut, "credentials.unavailable") && strings.Contains(errOut, tc.msg))
	}
}
