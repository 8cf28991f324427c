package image

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// Rootfs cache entries and their temporary neighbours under the cache
// root.
const (
	cacheFillPrefix  = ".fill-"  // an unpack under way: renamed to the digest when verified
	cacheStagePrefix = ".stage-" // the private staging layout of a fill
)

// Prepare is Unpack with a shared, read-only rootfs. It verifies req's
// image (through Verify, whose hash cache skips unchanged layers), then
// takes the rootfs from cacheRoot/<manifest hex>/, filling that entry
// first when missing: the verified blobs are copied (and hashed as they
// are copied) into a private staging layout, unpacked by umoci into
// cacheRoot/.fill-<random>, checked against umoci.json, given the mount
// points its config mounts on (so the runtime never creates a directory
// in it), and renamed to its digest: an entry exists only complete and
// verified, and one fill per digest runs at a time. Each use re-checks
// the entry's umoci.json and marks it used (its mtime, for PruneCache).
//
// The bundle Root/Name then holds only config.json (0600): the entry's
// config, patched as Unpack patches it, with root.path the entry's rootfs
// and root.readonly true (the runtime mounts it read-only in the
// container, so no container can change what another one runs), a tmpfs
// at /tmp (writable scratch space, 64 MiB; the image's other paths are
// read-only) unless the config mounts something there (a tmpfs it mounts
// there without a size= option gets the same size), and
// Patch.CgroupsPath.
// cacheRoot must satisfy what Request.Root does. Errors: as Unpack.
func (u *Unpacker) Prepare(ctx context.Context, req Request, cacheRoot string) (*Bundle, error) {
	b, err := u.prepare(ctx, req, cacheRoot)
	return b, withRetry(err)
}

func (u *Unpacker) prepare(ctx context.Context, req Request, cacheRoot string) (*Bundle, error) {
	name, root, err := req.target()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	cache, err := openRoot(cacheRoot)
	if err != nil {
		return nil, err
	}
	defer cache.Close()
	ev, err := u.VerifyFor(ctx, req.Reader, req.Layout, req.Manifest)
	if err != nil {
		return nil, err
	}
	entry, err := u.rootfs(ctx, cache, cacheRoot, req.Layout, req.Reader, ev.ManifestDigest)
	if err != nil {
		return nil, err
	}
	defer entry.Close()
	spec, err := readConfig(entry)
	if err != nil {
		return nil, err
	}
	if err := patchSpec(&spec, req.Patch); err != nil {
		return nil, err
	}
	spec.Root = &specs.Root{Path: filepath.Join(cacheRoot, ev.ManifestDigest.Encoded(), "rootfs"), Readonly: true}
	if !mounts(spec, "/tmp") {
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs",
			Options: []string{"nosuid", "nodev", "mode=1777", tmpSize}})
	}
	sizeTmpfs(spec.Mounts, "/tmp")
	if err := unix.Mkdirat(int(root.Fd()), name, 0o700); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil, wire.Errorf(CodeBundleExists, "bundle %s already exists", name)
		}
		return nil, wire.Wrap(CodePathUnsafe, "cannot make the bundle directory", err)
	}
	bundle, err := openAt(int(root.Fd()), name, true, CodeBundleInvalid)
	if err == nil {
		err = writeConfigAt(int(bundle.Fd()), &spec)
		bundle.Close()
	}
	if err != nil {
		os.RemoveAll(filepath.Join(req.Root, name))
		return nil, err
	}
	return &Bundle{Path: filepath.Join(req.Root, name), Name: name, Evidence: *ev}, nil
}

// rootfs returns the open cache entry for manifest, filling it first when
// it does not exist, and marks it used.
func (u *Unpacker) rootfs(ctx context.Context, cache *os.File, cacheRoot, layout string, r *Reader, manifest digest.Digest) (*os.File, error) {
	name := manifest.Encoded()
	unlock := u.fills.lock(name)
	defer unlock()
	cfd := int(cache.Fd())
	entry, err := openEntry(cfd, name, manifest)
	if errors.Is(err, errNoEntry) {
		entry, err = u.fill(ctx, cfd, cacheRoot, layout, r, manifest)
	}
	if err != nil {
		return nil, err
	}
	now := unix.NsecToTimespec(time.Now().UnixNano())
	_ = unix.UtimesNanoAt(cfd, name, []unix.Timespec{now, now}, unix.AT_SYMLINK_NOFOLLOW) // last use, for PruneCache
	return entry, nil
}

// errNoEntry is openEntry's cause for a digest that has no entry yet.
var errNoEntry = errors.New("no cache entry")

// openEntry opens the complete entry name and checks that its umoci.json
// names manifest. Errors: errNoEntry, CodeBlobUnsafe, CodeUnpackMismatch.
func openEntry(cfd int, name string, manifest digest.Digest) (*os.File, error) {
	entry, err := openAt(cfd, name, true, CodeUnpackFailed)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, errNoEntry
		}
		return nil, err
	}
	if err := checkUmociJSON(entry, manifest); err != nil {
		entry.Close()
		return nil, err
	}
	return entry, nil
}

// fill unpacks manifest from layout into a new cache entry (see Prepare)
// and returns it open.
func (u *Unpacker) fill(ctx context.Context, cfd int, cacheRoot, layout string, r *Reader, manifest digest.Digest) (*os.File, error) {
	fillName := cacheFillPrefix + randHex(8)
	kept := false
	defer func() {
		if !kept {
			os.RemoveAll(filepath.Join(cacheRoot, fillName))
		}
	}()
	if _, _, err := u.stageAndUnpack(ctx, cfd, cacheRoot, layout, r, manifest, fillName); err != nil {
		return nil, err
	}
	f, err := openAt(cfd, fillName, true, CodeUnpackFailed)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := checkUmociJSON(f, manifest); err != nil {
		return nil, err
	}
	spec, err := readConfig(f)
	if err != nil {
		return nil, err
	}
	if err := mountPoints(f, spec); err != nil {
		return nil, err
	}
	name := manifest.Encoded()
	if err := unix.Renameat(cfd, fillName, cfd, name); err != nil {
		if !errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.ENOTEMPTY) {
			return nil, wire.Wrap(CodeUnpackFailed, "cannot complete the rootfs cache entry", err)
		}
		// Another process filled it meanwhile: use theirs, drop ours.
	} else {
		kept = true
		_ = unix.Fsync(cfd)
	}
	return openEntry(cfd, name, manifest)
}

// mountPoints makes, in the entry's rootfs, the directories the config
// and Prepare mount on that sit directly under / ("/proc", "/tmp", ...:
// deeper ones lie on those mounts), so the runtime, which would make a
// missing mount point itself, never writes into the shared rootfs. An
// existing name (a directory, or a symlink the runtime resolves inside
// the rootfs) is left as it is.
func mountPoints(entry *os.File, spec specs.Spec) error {
	rootfs, err := openAt(int(entry.Fd()), "rootfs", true, CodeUnpackFailed)
	if err != nil {
		return err
	}
	defer rootfs.Close()
	dests := []string{"/tmp"}
	for _, m := range spec.Mounts {
		dests = append(dests, m.Destination)
	}
	for _, d := range dests {
		d = filepath.Clean("/" + d)
		if d == "/" || strings.Count(d, "/") != 1 {
			continue
		}
		if err := unix.Mkdirat(int(rootfs.Fd()), d[1:], 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return wire.Wrap(CodeUnpackFailed, "cannot make a mount point in the cached rootfs", err)
		}
	}
	return nil
}

// tmpSize is the size option of the /tmp tmpfs Prepare gives a bundle
// (64 MiB), and of a tmpfs the config mounts there without one.
const tmpSize = "size=65536k"

// sizeTmpfs gives every tmpfs mounted at dest without a size= option
// tmpSize: a tmpfs without one may grow to half the host's memory.
func sizeTmpfs(ms []specs.Mount, dest string) {
	for i := range ms {
		m := &ms[i]
		if filepath.Clean(m.Destination) != dest || m.Type != "tmpfs" {
			continue
		}
		sized := false
		for _, o := range m.Options {
			sized = sized || strings.HasPrefix(o, "size=")
		}
		if !sized {
			m.Options = append(m.Options, tmpSize)
		}
	}
}

// mounts reports whether spec mounts something at dest.
func mounts(spec specs.Spec, dest string) bool {
	for _, m := range spec.Mounts {
		if filepath.Clean(m.Destination) == dest {
			return true
		}
	}
	return false
}

// PruneCache removes, under cacheRoot, what no fill is using any more and
// no bundle needs: leftovers of fills that did not finish (.fill-*,
// .stage-*), and entries not named in inUse whose last use is older than
// idle. Call it when no Prepare runs (at start-up). It returns the names
// it removed.
func PruneCache(cacheRoot string, inUse map[string]bool, idle time.Duration, now time.Time) ([]string, error) {
	ents, err := os.ReadDir(cacheRoot)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range ents {
		n := e.Name()
		switch {
		case strings.HasPrefix(n, cacheFillPrefix), strings.HasPrefix(n, cacheStagePrefix):
		case inUse[n]:
			continue
		default:
			if digest.Digest("sha256:"+n).Validate() != nil {
				continue // not ours
			}
			fi, err := e.Info()
			if err != nil || now.Sub(fi.ModTime()) < idle {
				continue
			}
		}
		if err := os.RemoveAll(filepath.Join(cacheRoot, n)); err != nil {
			return removed, err
		}
		removed = append(removed, n)
	}
	return removed, nil
}

// CacheEntryOf returns the name of the rootfs cache entry under cacheRoot
// that the bundle config at configPath runs from, or "" when it runs from
// none (it is read without following a symlink, and strictly).
func CacheEntryOf(configPath, cacheRoot string) string {
	f, err := os.OpenFile(configPath, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigJSON+1))
	if err != nil || len(b) > maxConfigJSON {
		return ""
	}
	var spec specs.Spec
	if decodeStrict(b, &spec, false) != nil || spec.Root == nil {
		return ""
	}
	rel, err := filepath.Rel(cacheRoot, spec.Root.Path)
	if err != nil || !strings.HasSuffix(rel, "/rootfs") || strings.Count(rel, "/") != 1 || strings.HasPrefix(rel, "..") {
		return ""
	}
	return strings.TrimSuffix(rel, "/rootfs")
}

// keyedLocks serialises work per key (one rootfs fill per digest).
type keyedLocks struct {
	mu sync.Mutex
	m  map[string]*keyedLock
}

type keyedLock struct {
	mu   sync.Mutex
	refs int
}

// lock takes key's lock and returns its release.
func (k *keyedLocks) lock(key string) func() {
	k.mu.Lock()
	l := k.m[key]
	if l == nil {
		l = &keyedLock{}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
