package image

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/matryer/is"
	"golang.org/x/sys/unix"
	"hostkit.dev/cmd/containerization-helper/internal/image/imagetest"
	"hostkit.dev/lib/wire"
)

// Another user (and its groups) the access checks read for; the files
// are real, with real owners and modes, only the reader is a value.
const (
	otherUID = 4242
	otherGID = 4242
	extraGID = 4243 // a supplementary group of some readers
)

var other = &Reader{UID: otherUID, GIDs: []uint32{otherGID}}

// openBase makes a directory under /tmp that every user may search (the
// access walk checks every ancestor), removed at the end of the test.
func openBase(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "hkacc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// worldReadable copies f's layout to dst with directories 0755 and files
// 0644, owned by root.
func worldReadable(t *testing.T, f fixture, dst string) string {
	t.Helper()
	copyTree(t, f.layout, dst)
	imagetest.OpenToAll(t, dst)
	return dst
}

// setACL sets a POSIX access ACL (system.posix_acl_access, version 2)
// on path; it also sets the group bits of the mode to the mask, as
// setfacl does.
func setACL(t *testing.T, path string, ents []aclEntry) {
	t.Helper()
	b := binary.LittleEndian.AppendUint32(nil, aclVersion)
	for _, e := range ents {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	if err := unix.Setxattr(path, aclXattr, b, 0); err != nil {
		t.Fatalf("set an ACL on %s: %v", path, err)
	}
}

// sameErr asserts that a and b are the same error as a client sees it.
func sameErr(t *testing.T, a, b error) {
	t.Helper()
	wa, wb := wire.AsError(a), wire.AsError(b)
	if wa.Code != wb.Code || wa.Msg != wb.Msg {
		t.Fatalf("errors differ:\n%v\n%v", a, b)
	}
}

// TestReaderModeBits: the owner class decides for the owner, the group
// class for a member, the other class for the rest; root's overrides
// never apply.
func TestReaderModeBits(t *testing.T) {
	t.Parallel()
	r := &Reader{UID: 10, GIDs: []uint32{20, 30}}
	for _, tc := range []struct {
		name     string
		mode     uint32
		uid, gid uint32
		want     uint32
		ok       bool
	}{
		{"owner reads", 0o400, 10, 0, accessR, true},
		{"owner class denies although other allows", 0o044, 10, 0, accessR, false},
		{"primary group", 0o040, 0, 20, accessR, true},
		{"supplementary group", 0o040, 0, 30, accessR, true},
		{"group class denies although other allows", 0o404, 0, 30, accessR, false},
		{"other", 0o004, 0, 0, accessR, true},
		{"other without read", 0o770, 0, 0, accessR, false},
		{"search needs x", 0o004, 0, 0, accessX, false},
		{"read and search", 0o005, 0, 0, accessR | accessX, true},
		{"read and search, search missing", 0o004, 0, 0, accessR | accessX, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is.New(t).Equal(r.modeGrants(tc.mode, tc.uid, tc.gid, tc.want), tc.ok)
		})
	}
}

// TestReaderACL evaluates ACLs as the kernel does; a grant is honoured
// only when the mode bits alone grant too (checked in TestLayoutAccess).
func TestReaderACL(t *testing.T) {
	t.Parallel()
	r := &Reader{UID: 10, GIDs: []uint32{20}}
	base := []aclEntry{{aclUserObj, 6, 0}, {aclGroupObj, 4, 0}, {aclOther, 4, 0}}
	with := func(extra ...aclEntry) []aclEntry {
		e := []aclEntry{base[0]}
		e = append(e, extra...)
		return append(e, base[1:]...)
	}
	for _, tc := range []struct {
		name     string
		ents     []aclEntry
		uid, gid uint32
		ok       bool
	}{
		{"other entry", base, 0, 0, true},
		{"named user denies", with(aclEntry{aclUser, 0, 10}, aclEntry{aclMask, 4, 0}), 0, 0, false},
		{"named user grants", with(aclEntry{aclUser, 4, 10}, aclEntry{aclMask, 4, 0}), 0, 0, true},
		{"named user limited by the mask", with(aclEntry{aclUser, 4, 10}, aclEntry{aclMask, 0, 0}), 0, 0, false},
		{"named group grants", with(aclEntry{aclGroup, 4, 20}, aclEntry{aclMask, 4, 0}), 0, 0, true},
		{"matched group denies, other would allow", []aclEntry{{aclUserObj, 6, 0}, {aclGroupObj, 0, 0}, {aclOther, 4, 0}}, 0, 20, false},
		{"owner entry", []aclEntry{{aclUserObj, 0, 0}, {aclGroupObj, 4, 0}, {aclOther, 4, 0}}, 10, 0, false},
		{"unknown tag", []aclEntry{{0x40, 4, 0}, {aclOther, 4, 0}}, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is.New(t).Equal(r.aclGrants(tc.ents, tc.uid, tc.gid, accessR), tc.ok)
		})
	}
	_, ok := parseACL([]byte{1, 0, 0, 0})
	is.New(t).True(!ok) // wrong version
}

// TestLayoutAccess reads real layouts, with real owners and modes, for
// the helper itself (nil) and for another user: both sides of every rule.
func TestLayoutAccess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	verify := func(dir string, r *Reader) error {
		_, err := newUnpacker(t).VerifyFor(ctx, r, dir, f.manifest)
		return err
	}
	// The reference refusals: what a missing layout and a missing blob
	// look like to another user.
	missingLayout := verify(filepath.Join(openBase(t), "nothing-here"), other)
	isCode(t, missingLayout, CodeNotFound)
	holey := worldReadable(t, f, filepath.Join(openBase(t), "layout"))
	m := manifestOf(t, holey, f.manifest)
	blob := func(layout string) string { return imagetest.BlobPath(layout, m.Layers[0].Digest) }
	if err := os.Remove(blob(holey)); err != nil {
		t.Fatal(err)
	}
	missingBlob := verify(holey, other)
	isCode(t, missingBlob, CodeBlobMissing)

	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, layout string) // layout is world-readable when it runs
		path   func(layout string) string        // what is asked for; nil = the layout
		reader *Reader
		want   error // nil = verifies; else the same code and message
	}{
		{"world-readable, other user", nil, nil, other, nil},
		{"world-readable, helper", nil, nil, nil, nil},
		{"root-only 0700 parent, helper", func(t *testing.T, l string) { must(t, os.Chmod(filepath.Dir(l), 0o700)) }, nil, nil, nil},
		{"root-only 0700 parent, other user", func(t *testing.T, l string) { must(t, os.Chmod(filepath.Dir(l), 0o700)) }, nil, other, missingLayout},
		{"root-only 0700 layout, other user", func(t *testing.T, l string) { must(t, os.Chmod(l, 0o700)) }, nil, other, missingLayout},
		{"layout without read, other user", func(t *testing.T, l string) { must(t, os.Chmod(l, 0o711)) }, nil, other, missingLayout},
		{"blob 0600 root, other user", func(t *testing.T, l string) { must(t, os.Chmod(blob(l), 0o600)) }, nil, other, missingBlob},
		{"blob 0600 root, helper", func(t *testing.T, l string) { must(t, os.Chmod(blob(l), 0o600)) }, nil, nil, nil},
		{"index.json 0600 root, other user", func(t *testing.T, l string) { must(t, os.Chmod(filepath.Join(l, "index.json"), 0o600)) }, nil, other,
			wire.Errorf(CodeNotFound, "index.json is missing from the image layout or not readable by this client")},
		{"blobs/ without search, other user", func(t *testing.T, l string) { must(t, os.Chmod(filepath.Join(l, "blobs"), 0o744)) }, nil, other,
			wire.Errorf(CodeBlobMissing, "blobs is missing from the image layout or not readable by this client")},
		{"blob owned by the reader, 0400", func(t *testing.T, l string) {
			must(t, os.Chown(blob(l), otherUID, 0))
			must(t, os.Chmod(blob(l), 0o400))
		}, nil, other, nil},
		{"blob owned by the reader, owner class denies", func(t *testing.T, l string) {
			must(t, os.Chown(blob(l), otherUID, 0))
			must(t, os.Chmod(blob(l), 0o044))
		}, nil, other, missingBlob},
		{"blob group-readable, reader in the group", func(t *testing.T, l string) {
			must(t, os.Chown(blob(l), 0, extraGID))
			must(t, os.Chmod(blob(l), 0o640))
		}, nil, &Reader{UID: otherUID, GIDs: []uint32{otherGID, extraGID}}, nil},
		{"blob group-readable, reader not in the group", func(t *testing.T, l string) {
			must(t, os.Chown(blob(l), 0, extraGID))
			must(t, os.Chmod(blob(l), 0o640))
		}, nil, other, missingBlob},
		{"ACL grants the user on a 0700 parent", func(t *testing.T, l string) {
			setACL(t, filepath.Dir(l), []aclEntry{{aclUserObj, 7, 0}, {aclUser, 5, otherUID}, {aclGroupObj, 0, 0}, {aclMask, 5, 0}, {aclOther, 0, 0}})
		}, nil, other, missingLayout},
		{"ACL grants the user on a root-only blob", func(t *testing.T, l string) {
			must(t, os.Chmod(blob(l), 0o600))
			setACL(t, blob(l), []aclEntry{{aclUserObj, 6, 0}, {aclUser, 4, otherUID}, {aclGroupObj, 0, 0}, {aclMask, 4, 0}, {aclOther, 0, 0}})
		}, nil, other, missingBlob},
		{"ACL denies the user what the mode bits grant", func(t *testing.T, l string) {
			setACL(t, blob(l), []aclEntry{{aclUserObj, 6, 0}, {aclUser, 0, otherUID}, {aclGroupObj, 4, 0}, {aclMask, 4, 0}, {aclOther, 4, 0}})
		}, nil, other, missingBlob},
		{"ACL and mode bits both grant", func(t *testing.T, l string) {
			setACL(t, blob(l), []aclEntry{{aclUserObj, 6, 0}, {aclUser, 4, 9999}, {aclGroupObj, 4, 0}, {aclMask, 4, 0}, {aclOther, 4, 0}})
		}, nil, other, nil},
		{"ACL on a blob, helper", func(t *testing.T, l string) {
			must(t, os.Chmod(blob(l), 0o600))
			setACL(t, blob(l), []aclEntry{{aclUserObj, 6, 0}, {aclUser, 4, otherUID}, {aclGroupObj, 0, 0}, {aclMask, 4, 0}, {aclOther, 0, 0}})
		}, nil, nil, nil},
		{"symlink in the path to a readable layout", func(t *testing.T, l string) {
			must(t, os.Symlink(filepath.Dir(l), filepath.Join(filepath.Dir(filepath.Dir(l)), "link")))
		}, func(l string) string { return filepath.Join(filepath.Dir(filepath.Dir(l)), "link", "layout") }, other, nil},
		{"relative symlink and .. in the path", func(t *testing.T, l string) {
			must(t, os.Mkdir(filepath.Join(filepath.Dir(l), "sub"), 0o755))
			must(t, os.Symlink("../sub/..", filepath.Join(filepath.Dir(l), "sub", "up")))
		}, func(l string) string { return filepath.Join(filepath.Dir(l), "sub", "up", "layout") }, other, nil},
		{"symlink in the path into a 0700 directory", func(t *testing.T, l string) {
			must(t, os.Chmod(filepath.Dir(l), 0o700))
			must(t, os.Symlink(filepath.Dir(l), filepath.Join(filepath.Dir(filepath.Dir(l)), "link")))
		}, func(l string) string { return filepath.Join(filepath.Dir(filepath.Dir(l)), "link", "layout") }, other, missingLayout},
		{"symlink loop", func(t *testing.T, l string) {
			must(t, os.Symlink("loop", filepath.Join(filepath.Dir(l), "loop")))
		}, func(l string) string { return filepath.Join(filepath.Dir(l), "loop", "layout") }, other, missingLayout},
		{"the layout itself a symlink", func(t *testing.T, l string) {
			must(t, os.Symlink(l, filepath.Join(filepath.Dir(l), "alias")))
		}, func(l string) string { return filepath.Join(filepath.Dir(l), "alias") }, other, missingLayout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// base (0755) / parent (0755) / layout
			parent := filepath.Join(openBase(t), "parent")
			must(t, os.Mkdir(parent, 0o755))
			must(t, os.Chmod(parent, 0o755))
			l := worldReadable(t, f, filepath.Join(parent, "layout"))
			if tc.setup != nil {
				tc.setup(t, l)
			}
			path := l
			if tc.path != nil {
				path = tc.path(l)
			}
			err := verify(path, tc.reader)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("verify: %v", err)
				}
				return
			}
			sameErr(t, err, tc.want)
		})
	}
}

// TestPrepareForReader: the unpack path checks too, before it stages
// anything, and unpacks for a reader that may read the layout.
func TestPrepareForReader(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	u := newUnpacker(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		mode os.FileMode // of the layout's parent
		ok   bool
	}{{"readable", 0o755, true}, {"root-only", 0o700, false}} {
		t.Run(tc.name, func(t *testing.T) {
			parent := filepath.Join(openBase(t), "parent")
			must(t, os.Mkdir(parent, 0o755))
			l := worldReadable(t, f, filepath.Join(parent, "layout"))
			must(t, os.Chmod(parent, tc.mode))
			root, cache := t.TempDir(), t.TempDir()
			_, err := u.Prepare(ctx, Request{Layout: l, Manifest: f.manifest, Root: root, Reader: other}, cache)
			if tc.ok {
				if err != nil {
					t.Fatalf("prepare: %v", err)
				}
				return
			}
			isCode(t, err, CodeNotFound)
			ents, _ := os.ReadDir(cache)
			is.New(t).Equal(len(ents), 0) // nothing staged
		})
	}
}

// TestReaderOf reads a real process's credentials: its supplementary
// groups count; a uid or gid that no longer matches, or a gone process,
// is refused; root needs no Reader.
func TestReaderOf(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	cmd := exec.Command("/bin/sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherGID, Groups: []uint32{extraGID, 65534}}}
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := int32(cmd.Process.Pid)

	r, err := ReaderOf(otherUID, otherGID, pid)
	is.NoErr(err)
	is.Equal(r.UID, uint32(otherUID))
	is.Equal(r.GIDs, []uint32{otherGID, extraGID}) // the overflow gid is left out

	_, err = ReaderOf(otherUID, extraGID, pid) // not its gid any more
	isCode(t, err, CodeNotFound)
	_, err = ReaderOf(otherUID+1, otherGID, pid)
	isCode(t, err, CodeNotFound)

	r, err = ReaderOf(0, 0, pid)
	is.NoErr(err)
	is.True(r == nil)

	cmd.Process.Kill()
	cmd.Wait()
	_, err = ReaderOf(otherUID, otherGID, pid)
	isCode(t, err, CodeNotFound)
}

// BenchmarkVerifyFor compares a verification (hash cache warm) for the
// helper itself with one for another user, which adds the path walk and
// an fstat and ACL read per opened file.
func BenchmarkVerifyFor(b *testing.B) {
	l, d := imagetest.Build(b, b.TempDir())
	base, err := os.MkdirTemp("/tmp", "hkacc")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(base) })
	dst := filepath.Join(base, "layout")
	if err := exec.Command("cp", "-a", l, dst).Run(); err != nil {
		b.Fatal(err)
	}
	if err := exec.Command("chmod", "-R", "a+rX", base).Run(); err != nil {
		b.Fatal(err)
	}
	u := newUnpacker(b)
	for _, r := range []*Reader{nil, other} {
		name := "helper"
		if r != nil {
			name = "other-user"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := u.VerifyFor(context.Background(), r, dst, d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
