package cli

import (
	"flag"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// update rewrites the golden files: go test ./internal/cli -run Golden -update
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// normaliser turns an output into its golden form: the temporary root
// becomes <ROOT>, and run-dependent values (epochs, uptimes, the user)
// become placeholders.
type normaliser struct {
	root     string
	collapse bool // table output: runs of spaces become two, as alignment depends on path lengths
}

var (
	reEpoch    = regexp.MustCompile(`\b[0-9a-f]{16}\b`)
	reUp       = regexp.MustCompile(`up [0-9]+s`)
	reUptimeMS = regexp.MustCompile(`"uptime_ms": [0-9]+`)
	reMlock    = regexp.MustCompile(`"mlock": "[a-z]+"`)
	reOwner    = regexp.MustCompile(`"owner": "[^"]*"`)
	reSpaces   = regexp.MustCompile(` {2,}`)
)

func (n normaliser) apply(s string) string {
	if n.root != "" {
		s = strings.ReplaceAll(s, n.root, "<ROOT>")
	}
	s = reEpoch.ReplaceAllString(s, "<EPOCH>")
	s = reUp.ReplaceAllString(s, "up <N>s")
	s = reUptimeMS.ReplaceAllString(s, `"uptime_ms": <MS>`)
	s = reMlock.ReplaceAllString(s, `"mlock": "<MLOCK>"`)
	s = reOwner.ReplaceAllString(s, `"owner": "<USER>"`)
	if u, err := user.Current(); err == nil {
		s = strings.ReplaceAll(s, "  "+u.Username+"  ", "  <USER>  ")
	}
	if n.collapse {
		s = reSpaces.ReplaceAllString(s, "  ")
	}
	return s
}

// golden compares the exit code, stdout and stderr of one run with
// testdata/<name>.golden.
func golden(t *testing.T, name string, n normaliser, code int, stdout, stderr string) {
	t.Helper()
	got := fmt.Sprintf("exit: %d\n--- stdout\n%s--- stderr\n%s", code, n.apply(stdout), n.apply(stderr))
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (-update rewrites it)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
