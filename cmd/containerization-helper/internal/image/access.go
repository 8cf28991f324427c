package image

import (
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// Reader is the user an image layout is read for: the helper runs as
// root, and reads a layout for a non-root peer only as far as that peer
// could read it itself. A nil *Reader is the helper itself (a root peer):
// nothing is checked.
//
// Rules (non-root readers only). The layout path is resolved one
// component at a time from "/" by descriptor (a symlink before the last
// component is followed by reading it, at most 40; the last component
// must not be one), and every directory a name is looked up in must grant
// the reader search (x); the layout directory must grant read and search;
// blobs/ and blobs/sha256/ search; oci-layout, index.json and every blob
// read. Each check is made by fstat(2) on the descriptor that was opened
// and is then used, so a path swapped between check and use cannot get
// past it. Permission follows the POSIX mode bits: the owner class when
// UID owns the file, else the group class when any of GIDs is its group,
// else the other class; capabilities and root's overrides never apply.
// A file or directory with a POSIX access ACL (the system.posix_acl_access
// extended attribute) is readable only when the mode bits alone grant
// access and the ACL, evaluated the way the kernel does, does too: a grant
// that only the ACL makes (a named user or group entry) is not honoured.
// LSMs (SELinux, AppArmor) are not consulted.
//
// For a non-root reader, a layout that does not exist and one the reader
// may not reach give the same error (CodeNotFound, errNoLayoutMsg), and a
// file inside it that is missing and one the reader may not read give the
// same error too (CodeNotFound or CodeBlobMissing, "<name> is missing
// from the image layout or not readable by this client"): the helper's
// answers tell a client nothing about paths it cannot see.
type Reader struct {
	// UID is the reader's effective (and filesystem) uid; never 0.
	UID uint32
	// GIDs are its effective gid first, then its supplementary groups.
	GIDs []uint32
}

// errNoLayoutMsg is the one message a non-root reader gets for a layout
// directory that is missing or that it may not read.
const errNoLayoutMsg = "the image layout directory does not exist or is not readable by this client"

// maxSymlinks bounds the symlinks followed while resolving a layout path
// for a reader (Linux's MAXSYMLINKS).
const maxSymlinks = 40

// Access bits, as in the mode's rwx triplets.
const (
	accessX = 1
	accessR = 4
)

// noLayout is the uniform refusal of a layout path for a non-root reader;
// cause is kept for the helper's own log, never sent.
func noLayout(cause error) error {
	return wire.Wrap(CodeNotFound, errNoLayoutMsg, cause)
}

// errDenied is the cause of a refusal by the access check.
var errDenied = errors.New("the reader may not access this file")

// inGroup reports whether gid is one of the reader's groups.
func (r *Reader) inGroup(gid uint32) bool { return slices.Contains(r.GIDs, gid) }

// modeGrants reports whether the mode bits of a file owned by uid:gid
// grant r every access bit in want (POSIX: the first class that matches
// decides).
func (r *Reader) modeGrants(mode, uid, gid, want uint32) bool {
	var bits uint32
	switch {
	case uid == r.UID:
		bits = mode >> 6
	case r.inGroup(gid):
		bits = mode >> 3
	default:
		bits = mode
	}
	return bits&want == want
}

// ACL entry tags (linux/posix_acl.h) and the xattr format version
// (linux/posix_acl_xattr.h).
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
	aclVersion  = 2
	// aclXattr is the extended attribute holding a file's access ACL.
	aclXattr = "system.posix_acl_access"
	// maxACLBytes caps the ACL read (4 + 8 bytes per entry).
	maxACLBytes = 64 << 10
)

// aclEntry is one entry of a POSIX ACL.
type aclEntry struct {
	tag, perm uint16
	id        uint32
}

// parseACL decodes the system.posix_acl_access value (little-endian
// version 2 header, then 8-byte entries). ok is false for anything
// malformed.
func parseACL(b []byte) (ents []aclEntry, ok bool) {
	if len(b) < 4 || (len(b)-4)%8 != 0 || binary.LittleEndian.Uint32(b) != aclVersion {
		return nil, false
	}
	for i := 4; i < len(b); i += 8 {
		ents = append(ents, aclEntry{
			tag:  binary.LittleEndian.Uint16(b[i:]),
			perm: binary.LittleEndian.Uint16(b[i+2:]),
			id:   binary.LittleEndian.Uint32(b[i+4:]),
		})
	}
	return ents, len(ents) > 0
}

// aclGrants evaluates ents for r on a file owned by uid:gid as the kernel
// does (posix_acl_permission): the owner entry; else a named user entry,
// limited by the mask; else any matching group entry (owning or named)
// that grants, limited by the mask, and a refusal when groups matched but
// none granted; else the other entry.
func (r *Reader) aclGrants(ents []aclEntry, uid, gid, want uint32) bool {
	masked := func(i int) bool {
		p := uint32(ents[i].perm)
		for _, m := range ents[i+1:] {
			if m.tag == aclMask {
				return p&uint32(m.perm)&want == want
			}
		}
		return p&want == want
	}
	found := false
	for i, e := range ents {
		switch e.tag {
		case aclUserObj:
			if uid == r.UID {
				return uint32(e.perm)&want == want
			}
		case aclUser:
			if e.id == r.UID {
				return masked(i)
			}
		case aclGroupObj, aclGroup:
			g := e.id
			if e.tag == aclGroupObj {
				g = gid
			}
			if r.inGroup(g) {
				found = true
				if uint32(e.perm)&want == want {
					return masked(i)
				}
			}
		case aclMask:
		case aclOther:
			return !found && uint32(e.perm)&want == want
		default:
			return false
		}
	}
	return false
}

// mayFD reports whether r may access the open file fd with every bit in
// want (Reader's rules); err is set only when fd cannot be inspected.
func (r *Reader) mayFD(fd int, want uint32) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	mode := uint32(st.Mode) & 0o777
	if !r.modeGrants(mode, st.Uid, st.Gid, want) {
		return false, nil
	}
	acl, err := fdACL(fd)
	if err != nil {
		return false, err
	}
	if acl == nil {
		return true, nil
	}
	ents, ok := parseACL(acl)
	return ok && r.aclGrants(ents, st.Uid, st.Gid, want), nil
}

// fdACL returns fd's access ACL xattr, or nil when it has none (or the
// filesystem has no xattrs). fd must not be an O_PATH descriptor.
func fdACL(fd int) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Fgetxattr(fd, aclXattr, buf)
		switch {
		case err == nil:
			return buf[:n], nil
		case errors.Is(err, unix.ENODATA), errors.Is(err, unix.ENOTSUP), errors.Is(err, unix.EOPNOTSUPP):
			return nil, nil
		case errors.Is(err, unix.ERANGE) && len(buf) < maxACLBytes:
			buf = make([]byte, maxACLBytes)
		default:
			return nil, err
		}
	}
}

// openLayoutFor opens the layout directory dir for r (Reader's rules; a
// nil r is openLayout). dir must be absolute. Errors: for a non-root
// reader, CodeNotFound with errNoLayoutMsg whatever went wrong.
func openLayoutFor(dir string, r *Reader) (*layoutDir, error) {
	if r == nil {
		return openLayout(dir)
	}
	if !strings.HasPrefix(dir, "/") {
		return nil, noLayout(errors.New("the layout path is not absolute"))
	}
	const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	rootfd, err := unix.Open("/", dirFlags, 0)
	if err != nil {
		return nil, noLayout(err)
	}
	// stack holds the directories resolved so far, "/" first: ".." pops.
	stack := []int{rootfd}
	defer func() {
		for _, fd := range stack {
			unix.Close(fd)
		}
	}()
	comps := strings.Split(dir, "/")
	links := 0
	for len(comps) > 0 {
		c := comps[0]
		comps = comps[1:]
		if c == "" {
			continue
		}
		cur := stack[len(stack)-1]
		// A lookup in cur (".", ".." too) needs search permission on it.
		if ok, err := r.mayFD(cur, accessX); err != nil || !ok {
			return nil, noLayout(orDenied(err))
		}
		switch c {
		case ".":
			continue
		case "..":
			if len(stack) > 1 {
				unix.Close(cur)
				stack = stack[:len(stack)-1]
			}
			continue
		}
		fd, err := unix.Openat(cur, c, dirFlags, 0)
		if err != nil {
			var st unix.Stat_t
			if len(comps) == 0 || unix.Fstatat(cur, c, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
				return nil, noLayout(err)
			}
			if links++; links > maxSymlinks {
				return nil, noLayout(unix.ELOOP)
			}
			target, err := readlinkAt(cur, c)
			if err != nil {
				return nil, noLayout(err)
			}
			if strings.HasPrefix(target, "/") {
				for _, fd := range stack[1:] {
					unix.Close(fd)
				}
				stack = stack[:1]
			}
			comps = append(strings.Split(target, "/"), comps...)
			continue
		}
		stack = append(stack, fd)
	}
	last := stack[len(stack)-1]
	if len(stack) == 1 {
		return nil, noLayout(errors.New("the layout path is /"))
	}
	if ok, err := r.mayFD(last, accessR|accessX); err != nil || !ok {
		return nil, noLayout(orDenied(err))
	}
	stack = stack[:len(stack)-1] // kept open, as the layout
	return &layoutDir{f: os.NewFile(uintptr(last), dir), r: r}, nil
}

// orDenied is err, or errDenied when the check itself worked.
func orDenied(err error) error {
	if err != nil {
		return err
	}
	return errDenied
}

// readlinkAt reads the symlink name in dirfd.
func readlinkAt(dirfd int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	if n >= len(buf) {
		return "", unix.ENAMETOOLONG
	}
	return string(buf[:n]), nil
}

// checkOpened applies r's check to f, which l opened as name (a directory
// when dir is set): a directory needs search, a file read. A refusal is
// the same error as a missing name (missingErr); f is closed then.
func (l *layoutDir) checkOpened(f *os.File, name string, dir bool, missing string) (*os.File, error) {
	if l.r == nil {
		return f, nil
	}
	want := uint32(accessR)
	if dir {
		want = accessX
	}
	ok, err := l.r.mayFD(int(f.Fd()), want)
	if err != nil || !ok {
		f.Close()
		return nil, missingErr(name, missing, true, orDenied(err))
	}
	return f, nil
}

// missingErr is the error for a name missing from the layout; for a
// non-root reader (uniform) it is also the error for one it may not read.
func missingErr(name, code string, uniform bool, cause error) error {
	if uniform {
		return wire.Wrap(code, name+" is missing from the image layout or not readable by this client", cause)
	}
	return wire.Wrap(code, name+" is missing from the image layout", cause)
}
