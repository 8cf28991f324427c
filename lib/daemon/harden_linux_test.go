package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestDisableCoreDumps runs DisableCoreDumps in a child process (it changes
// process state for good) and reads back what the child saw.
func TestDisableCoreDumps(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var stderr bytes.Buffer
	cmd := child("harden")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("harden child: %v: %s", err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	got := map[string][3]uint64{}
	for sc.Scan() {
		var label string
		var d, cur, max uint64
		if _, err := fmt.Sscanf(sc.Text(), "%s dumpable=%d core=%d/%d", &label, &d, &cur, &max); err != nil {
			t.Fatalf("child line %q: %v", sc.Text(), err)
		}
		got[label] = [3]uint64{d, cur, max}
	}
	before, after := got["before"], got["after"]
	is.Equal(before[0], uint64(1))      // a fresh process is dumpable, so the check below means something
	is.True(before[1] > 0)              // the child raised RLIMIT_CORE first
	is.Equal(after, [3]uint64{0, 0, 0}) // not dumpable, RLIMIT_CORE 0/0
	is.True(!strings.Contains(stderr.String(), "DisableCoreDumps"))
}
