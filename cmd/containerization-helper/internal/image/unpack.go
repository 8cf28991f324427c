package image

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"
	"hostkit.dev/lib/procexec"
	"hostkit.dev/lib/wire"
)

// MutationUnpack is the procexec mutation kind of `umoci unpack`.
const MutationUnpack = "image.unpack"

// DefaultUmoci is where Debian installs umoci.
const DefaultUmoci = "/usr/bin/umoci"

// DefaultTimeout bounds one `umoci unpack` when Config.Timeout is 0.
const DefaultTimeout = 120 * time.Second

// Rule is the one procexec rule the Unpacker needs: umoci at exe with
// exactly `unpack --image <stage>:<tag> <bundle>`, mutating, kind
// MutationUnpack. The caller puts it in its Policy (and MutationUnpack in
// the supported kinds) next to its runtime rules.
func Rule(exe string) procexec.Rule {
	return procexec.Rule{
		Executable: exe,
		Args:       []string{"unpack", "--image", procexec.AnyArg, procexec.AnyArg},
		Class:      procexec.ClassMutating,
		Mutation:   MutationUnpack,
	}
}

// Config configures an Unpacker.
type Config struct {
	// Runner runs umoci; its policy must hold Rule(Umoci) and support
	// MutationUnpack. Required.
	Runner *procexec.Runner
	// Umoci is the umoci executable; "" means DefaultUmoci.
	Umoci string
	// Timeout bounds one unpack: 0 means DefaultTimeout (120 s); else
	// procexec's 1 s to 300 s.
	Timeout time.Duration
	// Limits caps verification; zero fields take their defaults.
	Limits Limits
}

// Unpacker verifies local images and unpacks them into bundles. It is safe
// for concurrent use (each call stages under its own random name).
type Unpacker struct {
	runner  *procexec.Runner
	umoci   string
	timeout time.Duration
	limits  Limits
	hashed  *hashCache // layers that hashed right, by file identity
	fills   keyedLocks // one rootfs cache fill per manifest digest at a time
}

// NewUnpacker checks c. Errors: procexec.CodeInvalidSpec.
func NewUnpacker(c Config) (*Unpacker, error) {
	if c.Runner == nil {
		return nil, wire.Errorf(procexec.CodeInvalidSpec, "an unpacker needs a process runner")
	}
	u := &Unpacker{runner: c.Runner, umoci: c.Umoci, timeout: c.Timeout, limits: c.Limits.withDefaults(),
		hashed: newHashCache(), fills: keyedLocks{m: map[string]*keyedLock{}}}
	if u.umoci == "" {
		u.umoci = DefaultUmoci
	}
	if u.timeout == 0 {
		u.timeout = DefaultTimeout
	}
	if u.timeout < procexec.MinTimeout || u.timeout > procexec.MaxTimeout {
		return nil, wire.Errorf(procexec.CodeInvalidSpec, "unpack timeout must be between 1 s and 300 s")
	}
	return u, nil
}

// Request is one unpack.
type Request struct {
	// Layout is the OCI image layout directory.
	Layout string
	// Manifest selects the image by digest; "" means the index's only
	// manifest.
	Manifest digest.Digest
	// Root is the bundle root: an absolute, clean path to an existing
	// directory owned by this user, not group/world writable, with no
	// symlink in its path. Its ancestors must be writable only by this
	// user too (e.g. the helper's state directory): everything inside is
	// reached through descriptors, but cleanup removes the staging layout
	// and a failed bundle by path.
	Root string
	// Name is the bundle directory under Root, [a-z0-9][a-z0-9_.-]{0,63}
	// without ".." (e.g. the helper-generated container id); "" means a
	// random "b-<16 hex>". It must not exist yet.
	Name string
	// Patch is applied to the bundle's config.json.
	Patch Patch
	// Reader is who Layout is read for (Reader): nil is the helper
	// itself; a non-root reader gets only what it could read itself.
	Reader *Reader
}

// Bundle is an unpacked, patched OCI runtime bundle.
type Bundle struct {
	Path     string   // Root/Name: holds config.json (0600) and rootfs/
	Name     string   // the bundle directory's name: [a-z0-9][a-z0-9_.-]{0,63} without ".."
	Evidence Evidence // of the manifest that was unpacked
}

// Unpack verifies req's image, unpacks exactly the verified manifest into
// Root/Name with umoci (package doc: private staging layout, random tag),
// checks umoci.json and patches config.json. Errors: every Verify code,
// CodePathUnsafe, CodeBundleExists, CodeUnpackFailed, CodeUnpackMismatch,
// CodeBundleInvalid, CodeCancelled. On error nothing is left behind.
func (u *Unpacker) Unpack(ctx context.Context, req Request) (*Bundle, error) {
	b, err := u.unpack(ctx, req)
	return b, withRetry(err)
}

// unpack is Unpack without the retry hints.
func (u *Unpacker) unpack(ctx context.Context, req Request) (*Bundle, error) {
	name, root, err := req.target()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	rfd := int(root.Fd())
	var st unix.Stat_t
	if err := unix.Fstatat(rfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		return nil, wire.Errorf(CodeBundleExists, "bundle %s already exists", name)
	} else if !errors.Is(err, unix.ENOENT) {
		return nil, wire.Wrap(CodePathUnsafe, "cannot check the bundle path", err)
	}

	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(filepath.Join(req.Root, name))
		}
	}()
	ev, desc, err := u.stageAndUnpack(ctx, rfd, req.Root, req.Layout, req.Reader, req.Manifest, name)
	if err != nil {
		return nil, err
	}
	bundle, err := openAt(rfd, name, true, CodeUnpackFailed)
	if err != nil {
		return nil, err
	}
	defer bundle.Close()
	if err := checkUmociJSON(bundle, desc.Digest); err != nil {
		return nil, err
	}
	if err := patchConfig(bundle, req.Patch); err != nil {
		return nil, err
	}
	ok = true
	return &Bundle{Path: filepath.Join(req.Root, name), Name: name, Evidence: *ev}, nil
}

// stageAndUnpack verifies manifest in layout while copying its blobs
// (hashed as they are copied) into a private staging layout
// root/.stage-<random> (removed before it returns), writes that layout's
// index with the one verified manifest under a random tag, and runs
// `umoci unpack` of exactly that into root/target. It returns the evidence
// and the manifest's descriptor; the caller removes root/target on error.
func (u *Unpacker) stageAndUnpack(ctx context.Context, rfd int, root, layout string, r *Reader, manifest digest.Digest, target string) (*Evidence, v1.Descriptor, error) {
	var none v1.Descriptor
	stageName := cacheStagePrefix + randHex(8)
	stage, err := newStage(rfd, stageName, u.limits.MaxUnpackedBytes)
	if err != nil {
		return nil, none, err
	}
	defer os.RemoveAll(filepath.Join(root, stageName))
	defer stage.Close()
	l, err := openLayoutFor(layout, r)
	if err != nil {
		return nil, none, err
	}
	ev, desc, err := verify(ctx, l, manifest, u.limits, stage, nil)
	l.Close()
	if err != nil {
		return nil, none, err
	}
	tag := "hk-" + randHex(8)
	if err := stage.writeIndex(desc, tag); err != nil {
		return nil, none, err
	}
	if err := u.run(ctx, root, stageName+":"+tag, target); err != nil {
		return nil, none, err
	}
	return ev, desc, nil
}

// target checks what every request shares (the bundle name, "" for a
// random one; the patch) and opens the bundle root. The caller closes it.
func (req *Request) target() (string, *os.File, error) {
	name := req.Name
	if name == "" {
		name = "b-" + randHex(8)
	}
	if !validName(name) {
		return "", nil, wire.Errorf(CodePathUnsafe, "bundle name must match [a-z0-9][a-z0-9_.-]{0,63} without \"..\"")
	}
	if err := req.Patch.validate(); err != nil {
		return "", nil, err
	}
	root, err := openRoot(req.Root)
	if err != nil {
		return "", nil, err
	}
	return name, root, nil
}

// run executes `umoci unpack --image <image> <bundle>` in the pinned root.
func (u *Unpacker) run(ctx context.Context, root, image, bundle string) error {
	wd, err := procexec.OpenWorkDir(root)
	if err != nil {
		return wire.Wrap(CodePathUnsafe, "the bundle root cannot be pinned", err)
	}
	defer wd.Close()
	_, err = u.runner.Run(ctx, &procexec.CommandSpec{
		Executable: u.umoci,
		Args:       []string{"unpack", "--image", image, bundle},
		Dir:        wd,
		Timeout:    u.timeout,
		Class:      procexec.ClassMutating,
		Mutation:   MutationUnpack,
		Purpose:    "unpack a verified image into a bundle",
	})
	switch {
	case err == nil:
		return nil
	case wire.HasCode(err, procexec.CodeCancelled):
		return &wire.Error{Code: CodeCancelled, Msg: "cancelled while unpacking", Retry: wire.RetrySafe, Err: err}
	default:
		return wire.Wrap(CodeUnpackFailed, "umoci unpack failed: "+wire.AsError(err).Msg, err)
	}
}

// umociMeta is the part of umoci.json (umoci's bundle metadata) that names
// what was unpacked: the descriptor walk from the index entry down to the
// manifest.
type umociMeta struct {
	From struct {
		Walk []v1.Descriptor `json:"descriptor_walk"` // index entry first, the unpacked manifest last
	} `json:"from_descriptor_path"` // the descriptor path umoci unpacked
}

// checkUmociJSON requires the bundle's umoci.json to name exactly the
// verified manifest: our staging index points straight at it, so the walk
// has one step. Errors: CodeUnpackMismatch.
func checkUmociJSON(bundle *os.File, want digest.Digest) error {
	f, err := openAt(int(bundle.Fd()), "umoci.json", false, CodeUnpackMismatch)
	if err != nil {
		return wire.Wrap(CodeUnpackMismatch, "the bundle has no usable umoci.json", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return wire.Wrap(CodeUnpackMismatch, "cannot read umoci.json", err)
	}
	var m umociMeta
	if err := decodeStrict(b, &m, true); err != nil {
		return wire.Wrap(CodeUnpackMismatch, "umoci.json does not decode", err)
	}
	w := m.From.Walk
	if len(w) != 1 || w[0].Digest != want || w[0].MediaType != v1.MediaTypeImageManifest {
		return wire.Errorf(CodeUnpackMismatch, "umoci unpacked something other than the verified manifest")
	}
	return nil
}

// openRoot checks and opens the bundle root: absolute and clean, every
// component opened with O_NOFOLLOW, a directory owned by this user that
// group and others cannot write. Errors: CodePathUnsafe.
func openRoot(root string) (*os.File, error) {
	if !filepath.IsAbs(root) || filepath.Clean(root) != root {
		return nil, wire.Errorf(CodePathUnsafe, "bundle root must be an absolute, clean path")
	}
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open("/", flags, 0)
	if err != nil {
		return nil, wire.Wrap(CodePathUnsafe, "cannot open /", err)
	}
	for _, c := range strings.Split(root, "/") {
		if c == "" {
			continue
		}
		next, err := unix.Openat(fd, c, flags, 0)
		unix.Close(fd)
		if err != nil {
			return nil, wire.Wrap(CodePathUnsafe, "bundle root is missing or has a symlink in its path", err)
		}
		fd = next
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		unix.Close(fd)
		return nil, wire.Wrap(CodePathUnsafe, "bundle root must be owned by this user and not writable by group or others", err)
	}
	return os.NewFile(uintptr(fd), root), nil
}

// validName reports whether n is a safe bundle directory name.
func validName(n string) bool {
	if n == "" || len(n) > 64 || strings.Contains(n, "..") {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		lower := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !lower && (i == 0 || c != '_' && c != '.' && c != '-') {
			return false
		}
	}
	return true
}

// randHex returns 2n random hex digits.
func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b)
}
