package procexec

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// Canary values in arguments, environment and output never reach the log,
// an error message or a Result's summary.
func TestCanariesNeverLogged(t *testing.T) {
	t.Parallel()
	const (
		argCanary   = "hk-canary-arg-7f3a9c51"      // registered with the scrubber
		outCanary   = "hk-canary-out-9e8d7c62"      // registered; printed to stdout and stderr
		envCanary   = "hk-canary-env-1b2c3d73"      // not registered: env values are never shown
		pwCanary    = "hk-canary-password-4d5e6f84" // not registered: --password=... is a secret shape
		tokenCanary = "hk-canary-token-5e6f7a95"    // not registered: follows a --token flag
	)
	canaries := []string{argCanary, outCanary, envCanary, pwCanary, tokenCanary}
	sc := redact.NewScrubber()
	sc.Register([]byte(argCanary))
	sc.Register([]byte(outCanary))
	r, logs := newTestRunner(t, sc)

	script := `printf '%s %s\n' "$1" "$SECRET_ENV"; echo ` + outCanary + `; echo "$1 ` + outCanary + ` $SECRET_ENV" >&2; exit 7`
	tests := []struct {
		name string
		spec *CommandSpec
		code string
	}{
		{"nonzero exit quoting stderr", sh(script, argCanary, "--password="+pwCanary, "--token", tokenCanary), CodeExitNonzero},
		{"overflow", func() *CommandSpec {
			s := sh(`while :; do echo "$1 $SECRET_ENV"; done`, argCanary, "--token", tokenCanary)
			s.StdoutLimit = 64
			return s
		}(), CodeOutputOverflow},
		{"refused", func() *CommandSpec {
			s := sh(script, argCanary, "--token", tokenCanary)
			s.Class = ClassForbidden
			return s
		}(), CodeForbidden},
		{"purpose with a canary", func() *CommandSpec {
			s := sh(`echo "$SECRET_ENV"`, "--password="+pwCanary)
			s.Purpose = "check " + argCanary
			return s
		}(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			tt.spec.Env = []string{"SECRET_ENV=" + envCanary, "PATH=/usr/bin:/bin"}
			res, err := r.Run(context.Background(), tt.spec)
			is.Equal(wire.CodeOf(err), tt.code)
			var shown []string
			if err != nil {
				shown = append(shown, err.Error(), fmt.Sprintf("%v %+v %#v", err, err, err))
			}
			if res != nil {
				shown = append(shown, res.Summary, res.String(), fmt.Sprint(res), res.LogValue().String())
				if tt.code != CodeForbidden {
					is.True(strings.Contains(string(res.Stdout), envCanary)) // the caller gets raw output
				}
			}
			for _, s := range shown {
				for _, c := range canaries {
					if strings.Contains(s, c) {
						t.Errorf("canary %s shown in %q", c, s)
					}
				}
			}
		})
	}
	t.Cleanup(func() {
		out := logs.String()
		if !strings.Contains(out, `"msg":"procexec.run"`) || !strings.Contains(out, redact.Redacted) ||
			!strings.Contains(out, `"env_keys":["SECRET_ENV","PATH"]`) {
			t.Errorf("expected canonical, redacted log lines, got %s", out)
		}
		for _, c := range canaries {
			if strings.Contains(out, c) {
				t.Errorf("canary %s in the log: %s", c, out)
			}
		}
	})
}
