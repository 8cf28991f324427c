package image

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"hostkit.dev/lib/procstat"
)

// ReaderOf returns the Reader for a socket peer whose kernel credentials
// (SO_PEERCRED, at connect) are uid, gid and pid: nil for uid 0 (the
// helper reads for root as itself), else uid with gid first and then the
// supplementary groups from /proc/<pid>/status ("Groups:"), read now. The
// process behind pid must still be the peer: its effective and filesystem
// uid and gid there must be uid and gid (a peer that changed identity
// since it connected, e.g. by exec'ing a set-gid program, is refused),
// and its start time (/proc/<pid>/stat field 22) must be the same before
// and after the read, as peerauth checks it. Unmapped groups (the
// overflow gid 65534) are left out. Errors: CodeNotFound, the error a
// non-root reader gets for a layout it may not read (Reader), when the
// process is gone or its identity does not match.
func ReaderOf(uid, gid uint32, pid int32) (*Reader, error) {
	if uid == 0 {
		return nil, nil
	}
	r, err := readerOf(uid, gid, pid)
	if err != nil {
		return nil, noLayout(err)
	}
	return r, nil
}

// readerOf is ReaderOf for a non-root uid, with plain errors.
func readerOf(uid, gid uint32, pid int32) (*Reader, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("image: peer pid %d is not visible", pid)
	}
	before, err := procstat.Read(int(pid))
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/status")
	if err != nil {
		return nil, err
	}
	r := &Reader{UID: uid, GIDs: []uint32{gid}}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		switch key {
		case "Uid", "Gid":
			want := uid
			if key == "Gid" {
				want = gid
			}
			// real, effective, saved, filesystem: access uses the last.
			if len(f) != 4 || f[1] != strconv.FormatUint(uint64(want), 10) || f[3] != f[1] {
				return nil, fmt.Errorf("image: peer %d's %s changed since it connected", pid, key)
			}
			seen[key] = true
		case "Groups":
			for _, s := range f {
				g, err := strconv.ParseUint(s, 10, 32)
				if err != nil {
					return nil, fmt.Errorf("image: peer %d's groups: %w", pid, err)
				}
				if g != overflowGID && !r.inGroup(uint32(g)) {
					r.GIDs = append(r.GIDs, uint32(g))
				}
			}
			seen[key] = true
		}
	}
	if !seen["Uid"] || !seen["Gid"] || !seen["Groups"] {
		return nil, errors.New("image: peer status lacks Uid, Gid or Groups")
	}
	if after, err := procstat.Read(int(pid)); err != nil || after.StartTime != before.StartTime {
		return nil, fmt.Errorf("image: peer %d changed while it was read", pid)
	}
	return r, nil
}

// overflowGID is the gid the kernel shows for a group that has no
// mapping in the reader's user namespace.
const overflowGID = 65534
