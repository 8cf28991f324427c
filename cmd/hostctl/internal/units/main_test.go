// Package units tests the systemd units and launchd agents in systemd/ and
// launchd/ against the real binaries and the real tools: systemd-analyze
// verify and security, systemd-sysusers, systemd-tmpfiles,
// systemd-socket-activate, a real NOTIFY_SOCKET, and Python's plistlib. It
// has only tests; CI runs it with every other package (scripts/test).
package units

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hostkit.dev/lib/buildtest"
)

// Set by TestMain.
var (
	repo   string // the repository root
	binDir string // the binaries, built once for every test process (buildtest)
)

// tools the tests drive; scripts/setup installs them (package systemd, and
// python3 from the base system).
var tools = []string{
	"/usr/bin/systemd-analyze", "/usr/bin/systemd-socket-activate", "/usr/bin/systemd-sysusers",
	"/usr/bin/systemd-tmpfiles", "/usr/bin/python3", "/bin/bash",
}

// binaries maps each binary to its environment prefix.
var binaries = map[string]string{
	"secretd": "SECRETD", "egressd": "EGRESSD", "supervisord": "SUPERVISORD",
	"containerization-helper": "CONTAINERIZATION_HELPER",
}

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	for _, t := range tools {
		if _, err := os.Stat(t); err != nil {
			fmt.Fprintf(os.Stderr, "units: %s is missing (%v): run scripts/setup (it installs the systemd package)\n", t, err)
			return 1
		}
	}
	var err error
	if repo, err = filepath.Abs("../../../.."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := os.Stat(filepath.Join(repo, "go.work")); err != nil {
		fmt.Fprintf(os.Stderr, "units: %s is not the repository root: %v\n", repo, err)
		return 1
	}
	dir, err := os.MkdirTemp("/tmp", "hkunits")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	// Linked from the build cache into one directory: the units and
	// agents name the binaries side by side.
	var pkgs []string
	for b := range binaries {
		pkgs = append(pkgs, filepath.Join(repo, "cmd", b))
	}
	if err := buildtest.Install(context.Background(), dir, pkgs...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// unitFile is a parsed systemd unit: section → key → values in order.
type unitFile map[string]map[string][]string

// get returns the last value of key in section, "" if absent.
func (u unitFile) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// parseUnit reads a unit file (systemd.syntax(7): sections, Key=Value,
// comments starting with # or ;).
func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return parseUnitReader(t, path, f)
}

func parseUnitReader(t *testing.T, name string, r io.Reader) unitFile {
	t.Helper()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
			continue
		case strings.HasSuffix(line, "\\"):
			t.Fatalf("%s:%d: continuation lines are not used in hostkit's units", name, n)
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Fatalf("%s:%d: not Key=Value in a section: %q", name, n, line)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		u[section][k] = append(u[section][k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// services are the service units and the daemon name each serves.
var services = []struct{ unit, binary, name string }{
	{"hostkit-secretd.service", "secretd", "secretd"},
	{"hostkit-egressd.service", "egressd", "egressd"},
	{"hostkit-supervisord.service", "supervisord", "supervisord"},
	{"hostkit-containerization-helper.service", "containerization-helper", "helper"},
}

// copyFile copies src to dst with mode.
func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// shortDir makes a short directory under /tmp (socket paths are short).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "hku")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
