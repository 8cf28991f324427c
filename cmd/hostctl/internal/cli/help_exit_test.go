package cli

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestHelpRequestExitCodes: an explicit help request (-h, -help, --help,
// at the top or after a command) exits 0 with the usage on stderr; a
// missing command (bare hostctl, a bare group) or an unknown one stays a
// usage error (exit 2). Each case runs in process and as the built binary.
func TestHelpRequestExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want int
		errs []string // substrings of stderr
	}{
		{"dash h", []string{"-h"}, ExitOK, []string{"SUBCOMMANDS\n  doctor", "TOPICS\n  exit-codes"}},
		{"double dash help", []string{"--help"}, ExitOK, []string{"SUBCOMMANDS\n  doctor", "TOPICS\n  exit-codes"}},
		{"dash help", []string{"-help"}, ExitOK, []string{"SUBCOMMANDS\n  doctor"}},
		{"global flag then h", []string{"-root", "/tmp/hk-help-root", "-h"}, ExitOK, []string{"SUBCOMMANDS\n  doctor"}},
		{"doctor h", []string{"doctor", "-h"}, ExitOK, []string{"USAGE\n  hostctl doctor"}},
		{"group h", []string{"container", "-h"}, ExitOK, []string{"USAGE\n  hostctl container"}},
		{"verb help", []string{"audit", "verify", "--help"}, ExitOK, []string{"USAGE\n  hostctl audit verify"}},
		{"bare hostctl", nil, ExitUsage, []string{"SUBCOMMANDS\n  doctor", "TOPICS\n  exit-codes"}},
		{"bare group", []string{"container"}, ExitUsage, []string{"USAGE\n  hostctl container"}},
		{"bare group secret", []string{"secret"}, ExitUsage, []string{"USAGE\n  hostctl secret"}},
		{"unknown command", []string{"frobnicate"}, ExitUsage, []string{`unknown command "frobnicate" for hostctl`}},
		{"unknown flag", []string{"doctor", "--frob"}, ExitUsage, []string{"flag provided but not defined: -frob"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			code, out, errOut := runCLI(tt.args...)
			is.Equal(code, tt.want) // in-process exit code
			is.Equal(out, "")       // usage and errors go to stderr
			for _, s := range tt.errs {
				is.True(strings.Contains(errOut, s)) // stderr names the usage or the error
			}
			cmd := exec.Command(filepath.Join(binDir, "hostctl"), tt.args...)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			stdout, err := cmd.Output()
			is.Equal(exitStatus(err), tt.want) // the binary's exit status
			is.Equal(string(stdout), "")
			is.Equal(stderr.String(), errOut) // same text as in process
		})
	}
}

// TestHelpOverview: `hostctl help` prints on stdout, exit 0, the same
// overview that `hostctl -h` and bare `hostctl` print on stderr: one line
// per command and one per topic.
func TestHelpOverview(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	code, overview, errOut := runCLI("help")
	is.Equal(code, ExitOK)
	is.Equal(errOut, "")
	_, _, dashH := runCLI("-h")
	is.Equal(dashH, overview) // -h prints the overview
	_, _, bare := runCLI()
	is.Equal(bare, overview) // bare hostctl prints the overview
	for _, cmd := range []string{"doctor", "secret", "lease", "egress", "instance", "container", "version", "audit", "completion", "help", "demo"} {
		is.True(strings.Contains(overview, "\n  "+cmd+" ")) // one line per command
	}
	topics := overview[strings.Index(overview, "\nTOPICS\n"):]
	for _, topic := range topicNames() {
		line := regexp.MustCompile(`\n  ` + regexp.QuoteMeta(topic) + ` +` + regexp.QuoteMeta(topicSummaries[topic]) + `\n`)
		is.True(line.MatchString(topics)) // one line per topic
	}
}

// TestTopicSummaries: every help topic has a one-line summary, and no
// summary names a missing topic.
func TestTopicSummaries(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var names []string
	for n, s := range topicSummaries {
		is.True(s != "" && !strings.Contains(s, "\n")) // one non-empty line
		names = append(names, n)
	}
	slices.Sort(names)
	is.Equal(names, topicNames())
}
