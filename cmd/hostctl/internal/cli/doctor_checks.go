package cli

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/daemon"
)

// lockState reports whether the daemon behind socket holds its lock file
// (`<socket>.lock`, flock(2)): "held" (running), "free" (not running),
// "missing", or "unknown" (the file cannot be opened by this user).
func lockState(socket string) string {
	f, err := os.OpenFile(socket+".lock", os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	switch {
	case os.IsNotExist(err):
		return "missing"
	case err != nil:
		return "unknown"
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return "held"
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return "free"
}

// modeOwner returns path's permission bits and owner, or "" when absent.
func modeOwner(path string) (mode fs.FileMode, owner string, ok bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, "", false
	}
	if st, isStat := fi.Sys().(*syscall.Stat_t); isStat {
		owner = ownerName(st.Uid)
	}
	return fi.Mode(), owner, true
}

// setupWarnings looks for unsafe set-ups under the layout: daemon socket
// directories other than 0700/0750, world-writable sockets, a public
// directory that agents cannot read or others can write, and secretd's
// credential store with loose modes. Each warning is one sentence.
func setupWarnings(l daemon.Layout, rows []doctorRow) []string {
	var out []string
	for _, r := range rows {
		dir := filepath.Dir(r.Socket)
		if m, _, ok := modeOwner(dir); ok && m.Perm() != 0o700 && m.Perm() != 0o750 {
			out = append(out, fmt.Sprintf("%s: socket directory %s is %04o (want 0700, or 0750 with the hostkit group)", r.Daemon, dir, m.Perm()))
		}
		if m, _, ok := modeOwner(r.Socket); ok && m.Perm()&0o002 != 0 {
			out = append(out, fmt.Sprintf("%s: socket %s is world-writable (%04o); peers are still checked by uid, but tighten it", r.Daemon, r.Socket, m.Perm()))
		}
	}
	if m, _, ok := modeOwner(l.Public); ok && (m.Perm() != 0o755) {
		out = append(out, fmt.Sprintf("public directory %s is %04o (want 0755: agents read the CA bundle there, nobody else writes)", l.Public, m.Perm()))
	}
	creds := filepath.Join(l.StateDir(daemon.NameSecretd), "credentials")
	if m, _, ok := modeOwner(creds); ok && m.Perm() != 0o700 {
		out = append(out, fmt.Sprintf("secretd: credential directory %s is %04o (want 0700)", creds, m.Perm()))
	}
	entries, _ := os.ReadDir(creds)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".cred") {
			continue
		}
		p := filepath.Join(creds, e.Name())
		if m, _, ok := modeOwner(p); ok && m.Perm() != 0o600 {
			out = append(out, fmt.Sprintf("secretd: credential file %s is %04o (want 0600)", p, m.Perm()))
		}
	}
	return out
}
