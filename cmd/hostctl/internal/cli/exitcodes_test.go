package cli

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestExitCodesGolden: one real case per error class, with its exit code
// and its stderr (`hostctl: <code>: <message>` and a hint), and doctor's
// human and JSON output against a real secretd, paths normalised.
func TestExitCodesGolden(t *testing.T) {
	t.Parallel()
	up := shortRoot(t)
	startDaemon(t, "secretd", "secretd", up)
	empty := shortRoot(t)
	tests := []struct {
		name     string
		root     string
		args     []string
		want     int
		collapse bool
	}{
		{name: "exit_ok_version", root: empty, args: []string{"version"}, want: ExitOK},
		{name: "exit_usage_bad_value", root: empty, args: []string{"audit", "tail", "-n", "-1"}, want: ExitUsage},
		{name: "exit_not_found_credential", root: up, args: []string{"secret", "delete", "nosuch"}, want: ExitNotFound},
		{name: "exit_unavailable_secret_list", root: empty, args: []string{"secret", "list"}, want: ExitUnavailable},
		{name: "doctor_up", root: up, args: []string{"doctor", "--expect", "secretd"}, want: ExitOK, collapse: true},
		{name: "doctor_up_json", root: up, args: []string{"doctor", "--expect", "secretd", "--json"}, want: ExitOK},
		{name: "doctor_down", root: empty, args: []string{"doctor"}, want: ExitUnavailable, collapse: true},
		{name: "doctor_down_json", root: empty, args: []string{"doctor", "--json"}, want: ExitUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			code, out, errOut := runCLI(append([]string{"-root", tt.root}, tt.args...)...)
			is.Equal(code, tt.want) // exit code of the class
			golden(t, tt.name, normaliser{root: tt.root, collapse: tt.collapse}, code, out, errOut)
		})
	}
}

// TestExitUsageUnknownCommand: an unknown command, at the top or inside a
// group, exits 2 with a line that names it; a group alone prints its
// usage (which lists every command, so it is not a golden file).
func TestExitUsageUnknownCommand(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"top", []string{"frobnicate"}, `unknown command "frobnicate" for hostctl (hostctl -h lists them)`},
		{"in a group", []string{"container", "frob"}, `unknown command "frob" for hostctl container (hostctl container -h lists them)`},
		{"group alone", []string{"container"}, "USAGE\n  hostctl container"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			code, out, errOut := runCLI(tt.args...)
			is.Equal(code, ExitUsage)
			is.Equal(out, "")
			is.True(strings.Contains(errOut, tt.want))
		})
	}
}
