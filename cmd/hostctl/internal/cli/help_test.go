package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestHelpGolden: the topics, an unknown topic, and a command's usage.
func TestHelpGolden(t *testing.T) {
	t.Parallel()
	root := "/tmp/hk-help-root" // never created: layout only computes paths
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"help_index", []string{"help"}, ExitOK},
		{"help_exit_codes", []string{"help", "exit-codes"}, ExitOK},
		{"help_roles", []string{"help", "roles"}, ExitOK},
		{"help_layout", []string{"-root", root, "help", "layout"}, ExitOK},
		{"help_command", []string{"help", "audit", "verify"}, ExitOK},
		{"help_unknown", []string{"help", "nosuch"}, ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			code, out, errOut := runCLI(tt.args...)
			is.Equal(code, tt.want)
			golden(t, tt.name, normaliser{root: root}, code, out, errOut)
		})
	}
}

// TestExitCodeTopicMatchesConstants: `hostctl help exit-codes` documents
// every exit code constant with its number.
func TestExitCodeTopicMatchesConstants(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	text := helpTopics["exit-codes"]
	for code, word := range map[int]string{ExitOK: "ok", ExitFailure: "failure", ExitUsage: "usage", ExitNotFound: "not found", ExitDenied: "denied", ExitUnavailable: "unavailable"} {
		is.True(strings.Contains(text, "  "+string(rune('0'+code))+"  "+word)) // code and name documented
	}
}

// TestCompletionBash: the script covers every command and flag of the
// tree, is valid bash, and completes nouns, verbs, flags and values.
func TestCompletionBash(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	code, script, errOut := runCLI("completion", "bash")
	is.Equal(code, ExitOK)
	is.Equal(errOut, "")
	tree, err := commandTree(context.Background(), nil)
	is.NoErr(err)
	is.True(len(tree) > 10)
	for _, n := range tree {
		is.True(strings.Contains(script, `"`+strings.Join(n.path, " ")+`") echo`)) // every command path
	}
	for _, noun := range []string{"doctor", "secret", "lease", "audit", "completion", "help", "version"} {
		is.True(slices.Contains(tree[0].subs, noun)) // a root noun
	}
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Fatalf("/bin/bash is missing (%v): scripts/setup runs on Debian, which has it", err)
	}
	path := filepath.Join(t.TempDir(), "hostctl.bash")
	is.NoErr(os.WriteFile(path, []byte(script), 0o644))
	tests := []struct {
		words []string // the line so far; the last word is being completed
		want  string   // space-joined COMPREPLY
	}{
		{[]string{"au"}, "audit"},
		{[]string{"audit", ""}, "tail verify --egressd-socket --helper-socket --json --layout --root --secretd-socket --supervisord-socket --timeout"},
		{[]string{"-root", "/tmp", "audit", "tail", "--da"}, "--daemon"},
		{[]string{"audit", "tail", "--daemon", "s"}, "secretd supervisord"},
		{[]string{"audit", "tail", "-"}, ""}, // checked below: contains -f and -n
		{[]string{"help", "ro"}, "roles"},
		{[]string{"completion", ""}, "bash"},
		{[]string{"secret", "put", "--from-s"}, "--from-stdin"},
	}
	for _, tt := range tests {
		words := "hostctl " + strings.Join(quoteAll(tt.words), " ")
		cmd := exec.Command("/bin/bash", "-c", `source "$1"; eval "COMP_WORDS=($2)"; COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _hostctl; echo "${COMPREPLY[*]}"`, "bash", path, words)
		out, err := cmd.CombinedOutput()
		is.NoErr(err)
		got := strings.TrimSpace(string(out))
		if tt.want == "" {
			is.True(strings.Contains(" "+got+" ", " -f ") && strings.Contains(" "+got+" ", " -n ")) // one-letter flags
			continue
		}
		is.Equal(got, tt.want) // completion of tt.words
	}
}

func quoteAll(ws []string) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = "'" + w + "'"
	}
	return out
}

// TestCompletionUsage: only bash is supported.
func TestCompletionUsage(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	for _, args := range [][]string{{"completion"}, {"completion", "zsh"}, {"completion", "bash", "extra"}} {
		code, _, errOut := runCLI(args...)
		is.Equal(code, ExitUsage)
		is.True(strings.HasPrefix(errOut, "hostctl: usage: "))
	}
}
