package units

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/daemon"
)

// unitNames lists every unit in systemd/.
func unitNames(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"*.service", "*.socket"} {
		m, err := filepath.Glob(filepath.Join(repo, "systemd", pat))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			out = append(out, filepath.Base(p))
		}
	}
	if len(out) != 5 {
		t.Fatalf("systemd/ holds %d units (%v), want the 4 services and the helper socket", len(out), out)
	}
	return out
}

// systemdRoot makes a root directory for `systemd-analyze --root`: the
// host's unit library (for sysinit.target and friends), the built binaries
// at /usr/local/bin (verify checks ExecStart= exists and is executable),
// and units, by name, in /etc/systemd/system.
func systemdRoot(t *testing.T, units map[string][]byte) string {
	t.Helper()
	root := t.TempDir()
	lib := filepath.Join(root, "usr", "lib", "systemd")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", "/usr/lib/systemd/system", lib+"/").CombinedOutput(); err != nil {
		t.Fatalf("copying the unit library: %v\n%s", err, out)
	}
	for b := range binaries {
		dst := filepath.Join(root, "usr", "local", "bin", b)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(binDir, b), dst); err != nil {
			copyFile(t, filepath.Join(binDir, b), dst, 0o755)
		}
	}
	for name, body := range units {
		p := filepath.Join(root, "etc", "systemd", "system", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// repoUnits reads every unit of systemd/.
func repoUnits(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, n := range unitNames(t) {
		b, err := os.ReadFile(filepath.Join(repo, "systemd", n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

// verify runs systemd-analyze verify on names under root; any output is a
// finding (verify exits 0 on warnings such as an unknown key).
func verify(root string, names ...string) (string, error) {
	cmd := exec.Command("systemd-analyze", append([]string{"verify", "--root=" + root}, names...)...)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0", "SYSTEMD_PAGER=")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestSystemdVerify: every unit passes systemd-analyze verify with no
// output at all, and the check is meaningful: a misspelt key, a bad
// address family and a missing binary each produce a finding.
func TestSystemdVerify(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	units := repoUnits(t)
	root := systemdRoot(t, units)
	names := unitNames(t)
	out, err := verify(root, names...)
	if err != nil || out != "" {
		t.Fatalf("systemd-analyze verify %v: %v\n%s", names, err, out)
	}

	broken := map[string][]byte{
		"typo.service":   bytes.Replace(units["hostkit-secretd.service"], []byte("ProtectSystem=strict"), []byte("ProtectSytem=strict"), 1),
		"family.service": bytes.Replace(units["hostkit-secretd.service"], []byte("RestrictAddressFamilies=AF_UNIX"), []byte("RestrictAddressFamilies=AF_BOGUS"), 1),
		"nobin.service":  bytes.Replace(units["hostkit-secretd.service"], []byte("/usr/local/bin/secretd"), []byte("/usr/local/bin/no-such-secretd"), 1),
	}
	root = systemdRoot(t, broken)
	for name := range broken {
		out, err := verify(root, name)
		is.True(err != nil || out != "") // verify finds the planted mistake
		t.Logf("%s: %s", name, out)
	}
}

var reExposure = regexp.MustCompile(`Overall exposure level for (\S+): ([0-9]+\.[0-9]) (\S+)`)

// exposure runs systemd-analyze security --offline=true for unit.
func exposure(t *testing.T, root, unit string) (float64, string) {
	t.Helper()
	cmd := exec.Command("systemd-analyze", "security", "--offline=true", "--root="+root, "--no-pager", unit)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0", "SYSTEMD_COLORS=0")
	out, err := cmd.CombinedOutput()
	m := reExposure.FindStringSubmatch(string(out))
	if m == nil || m[1] != unit {
		t.Fatalf("systemd-analyze security %s: %v; no exposure line in:\n%s", unit, err, out)
	}
	v, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v, m[3]
}

// TestSystemdSecurity: secretd and egressd rate 2.0 or less ("OK" or
// "SAFE") with systemd-analyze security --offline=true, and
// docs/operators.md states every service's current score.
func TestSystemdSecurity(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := systemdRoot(t, repoUnits(t))
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "operators.md"))
	is.NoErr(err)
	for _, s := range services {
		score, level := exposure(t, root, s.unit)
		t.Logf("%s: exposure %.1f %s", s.unit, score, level)
		if s.name == daemon.NameSecretd || s.name == daemon.NameEgressd {
			is.True(score <= 2.0)                     // secretd and egressd: exposure at most 2.0
			is.True(level == "OK" || level == "SAFE") // rated OK or better
		}
		row := "| `" + s.unit + "` | " + strconv.FormatFloat(score, 'f', 1, 64) + " " + level + " |"
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/operators.md lacks the row %q: update its exposure table", row)
		}
	}
}

// TestSysusersAndTmpfiles applies systemd/hostkit.sysusers.conf and
// hostkit.tmpfiles.conf to an empty root with the real tools and checks
// the users, groups, directories and the credentials metadata secretd's
// unit loads.
func TestSysusersAndTmpfiles(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := t.TempDir()
	is.NoErr(os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	out, err := exec.Command("systemd-sysusers", "--root="+root, filepath.Join(repo, "systemd", "hostkit.sysusers.conf")).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	passwd := readTable(t, filepath.Join(root, "etc", "passwd"))
	group := readTable(t, filepath.Join(root, "etc", "group"))
	for _, u := range []string{"hostkit-secretd", "hostkit-egressd"} {
		is.True(passwd[u] != nil)                   // user created
		is.Equal(passwd[u][6], "/usr/sbin/nologin") // no login shell
		uid, err := strconv.Atoi(passwd[u][2])
		is.NoErr(err)
		is.True(uid < 1000) // a system user, outside the agent range
	}
	is.True(group["hostkit"] != nil)
	is.Equal(group["hostkit"][3], "hostkit-egressd") // egressd reaches secretd's group socket

	out, err = exec.Command("systemd-tmpfiles", "--root="+root, "--create", filepath.Join(repo, "systemd", "hostkit.tmpfiles.conf")).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-tmpfiles: %v\n%s", err, out)
	}
	gid := func(name string) string { return group[name][2] }
	tests := []struct {
		path  string
		mode  os.FileMode
		owner string // uid in the root's passwd, "0" for root
		group string
	}{
		{"run/hostkit", 0o755, "0", "0"},
		{"run/hostkit/public", 0o755, passwd["hostkit-egressd"][2], gid("hostkit")},
		{"run/hostkit/helper", 0o750, "0", gid("hostkit")},
		{"etc/hostkit", 0o755, "0", "0"},
		{"etc/hostkit/credstore", 0o700, "0", "0"},
		{"etc/hostkit/secretd-credentials.json", 0o600, "0", "0"},
	}
	for _, tt := range tests {
		fi, err := os.Lstat(filepath.Join(root, tt.path))
		is.NoErr(err)
		is.Equal(fi.Mode().Perm(), tt.mode) // mode of tt.path
		uid, gid := ownerOf(fi)
		is.Equal(uid, tt.owner) // owner of tt.path
		is.Equal(gid, tt.group) // group of tt.path
	}
	// The layout's system paths are where tmpfiles.d puts them.
	l, err := daemon.ResolveLayoutMode("", daemon.LayoutSystem)
	is.NoErr(err)
	is.Equal(l.Run, "/run/hostkit")
	is.Equal(l.Public, "/run/hostkit/public")
	is.Equal(filepath.Dir(l.Socket(daemon.NameHelper)), "/run/hostkit/helper")
	is.Equal(l.Config, "/etc/hostkit")
}

// readTable reads an /etc/passwd-style file: name → fields.
func readTable(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		out[fields[0]] = fields
	}
	return out
}

// TestUnitsMatchLayoutAndLifecycle: each service is Type=notify with a
// watchdog, its RuntimeDirectory=, StateDirectory= and LogsDirectory= are the
// system paths of docs/design.md ("Paths") for its daemon, the users it names
// exist in the sysusers file, secretd and egressd do not use PrivateUsers=,
// and supervisord keeps its instances across a restart.
func TestUnitsMatchLayoutAndLifecycle(t *testing.T) {
	t.Parallel()
	l, err := daemon.ResolveLayoutMode("", daemon.LayoutSystem)
	if err != nil {
		t.Fatal(err)
	}
	sysusers, err := os.ReadFile(filepath.Join(repo, "systemd", "hostkit.sysusers.conf"))
	if err != nil {
		t.Fatal(err)
	}
	known := func(name string) bool {
		return name == "root" || regexp.MustCompile(`(?m)^[ug]\s+`+regexp.QuoteMeta(name)+`\s`).Match(sysusers)
	}
	for _, s := range services {
		t.Run(s.unit, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			u := parseUnit(t, filepath.Join(repo, "systemd", s.unit))
			svc := u["Service"]
			is.Equal(u.get("Service", "Type"), "notify")
			wd, err := time.ParseDuration(u.get("Service", "WatchdogSec"))
			is.NoErr(err)
			is.True(wd >= 10*time.Second)    // a watchdog, not so short that a GC pause trips it
			if s.name != daemon.NameHelper { // the helper's socket comes from its .socket unit
				is.Equal("/run/"+u.get("Service", "RuntimeDirectory"), filepath.Dir(l.Socket(s.name)))
			}
			is.Equal("/var/lib/"+u.get("Service", "StateDirectory"), l.StateDir(s.name))
			is.Equal("/var/log/"+u.get("Service", "LogsDirectory"), l.LogDir(s.name))
			for _, k := range []string{"User", "Group", "SupplementaryGroups"} {
				for _, v := range svc[k] {
					is.True(known(v)) // users and groups come from hostkit.sysusers.conf
				}
			}
			_, private := svc["PrivateUsers"]
			is.True(!private) // PrivateUsers= would make every peer UID 65534
			switch s.name {
			case daemon.NameSupervisord:
				is.Equal(u.get("Service", "KillMode"), "process")
				is.Equal(u.get("Service", "RuntimeDirectoryPreserve"), "yes")
			case daemon.NameSecretd:
				is.Equal(u.get("Service", "RestrictAddressFamilies"), "AF_UNIX")
				is.True(len(svc["LoadCredential"])+len(svc["LoadCredentialEncrypted"]) > 0)
				is.True(u.get("Service", "LimitMEMLOCK") != "")
			case daemon.NameEgressd:
				is.Equal(u.get("Service", "RestrictAddressFamilies"), "AF_UNIX AF_INET AF_INET6 AF_NETLINK") // sock_diag for the loopback owner check
				is.Equal(u.get("Service", "ProcSubset"), "")                                                 // its fallback reads /proc/net/tcp
			}
		})
	}
	is := is.New(t)
	sock := parseUnit(t, filepath.Join(repo, "systemd", "hostkit-containerization-helper.socket"))
	is.Equal(sock.get("Socket", "ListenStream"), l.Socket(daemon.NameHelper))
	is.Equal(sock.get("Socket", "Accept"), "no") // one helper process gets the listener
}
