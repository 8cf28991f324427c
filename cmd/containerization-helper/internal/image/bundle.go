package image

import (
	"cmp"
	"encoding/json"
	"io"
	"os"
	"path"
	"strings"

	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// maxConfigJSON caps the bundle's config.json (bytes).
const maxConfigJSON = 4 << 20

// Patch is what Unpack changes in the bundle's config.json (runtime-spec
// config.md). The zero Patch makes a detached run of the image's own
// command.
type Patch struct {
	// Terminal sets process.terminal. The zero value (false) is right for
	// detached runs, whose stdio are files; true only when the caller
	// asks for a PTY (the runtime then needs a console socket).
	Terminal bool
	// Args replaces process.args when not nil; it must not be empty.
	Args []string
	// Env replaces process.env when not nil: "KEY=value" entries with
	// unique keys.
	Env []string
	// Cwd replaces process.cwd when not ""; it must be absolute.
	Cwd string
	// Annotations are set in config.json's annotations, replacing values
	// with the same key (the helper's ownership annotations).
	Annotations map[string]string
	// OwnedPrefix, when not "", removes every annotation the image brought
	// whose key starts with it before Annotations are added: umoci copies
	// image labels into annotations, and an image must never be able to
	// claim ownership.
	OwnedPrefix string
	// CgroupsPath sets linux.cgroupsPath when not "" (an absolute path:
	// runc and crun would otherwise use /<container id>). With it, the
	// container also gets DefaultPidsLimit and a memory limit
	// (MemoryLimit) unless its config sets its own.
	CgroupsPath string
	// MemoryLimit is the linux.resources.memory.limit (bytes) set with
	// CgroupsPath when the config sets none; 0 means DefaultMemoryLimit.
	MemoryLimit int64
	// FileSizeLimit is the RLIMIT_FSIZE (bytes, soft = hard) set when the
	// config has no RLIMIT_FSIZE; 0 means DefaultFileSizeLimit. It bounds
	// every file any process of the container writes, its console log
	// (its stdout and stderr) included.
	FileSizeLimit int64
}

// validate checks the patch before anything is done. Errors:
// CodeBundleInvalid.
func (p *Patch) validate() error {
	bad := func(msg string) error { return wire.Errorf(CodeBundleInvalid, "%s", msg) }
	if p.Args != nil && len(p.Args) == 0 {
		return bad("args, when given, must not be empty")
	}
	for _, a := range p.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return bad("an argument contains NUL")
		}
	}
	seen := map[string]bool{}
	for _, kv := range p.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || seen[k] || strings.IndexByte(kv, 0) >= 0 {
			return bad("env entries must be KEY=value with unique keys")
		}
		seen[k] = true
	}
	if p.Cwd != "" && (!path.IsAbs(p.Cwd) || strings.IndexByte(p.Cwd, 0) >= 0) {
		return bad("cwd must be absolute")
	}
	for k := range p.Annotations {
		if k == "" {
			return bad("an annotation key is empty")
		}
	}
	if p.MemoryLimit < 0 || p.FileSizeLimit < 0 {
		return bad("memory and file size limits must not be negative")
	}
	if p.CgroupsPath != "" && (!path.IsAbs(p.CgroupsPath) || path.Clean(p.CgroupsPath) != p.CgroupsPath || strings.IndexByte(p.CgroupsPath, 0) >= 0) {
		return bad("cgroups path must be absolute and clean")
	}
	return nil
}

// patchConfig reads bundle/config.json strictly (unknown fields refused, so
// nothing is silently dropped when it is written back), applies p, and
// replaces it atomically with mode 0600. Errors: CodeBundleInvalid.
func patchConfig(bundle *os.File, p Patch) error {
	spec, err := readConfig(bundle)
	if err != nil {
		return err
	}
	if err := patchSpec(&spec, p); err != nil {
		return err
	}
	out, err := json.Marshal(&spec)
	if err != nil {
		return wire.Wrap(CodeBundleInvalid, "config.json does not encode", err)
	}
	return writeAtomicAt(int(bundle.Fd()), "config.json", out)
}

// readConfig reads dir/config.json strictly. Errors: CodeBundleInvalid.
func readConfig(dir *os.File) (specs.Spec, error) {
	var spec specs.Spec
	f, err := openAt(int(dir.Fd()), "config.json", false, CodeBundleInvalid)
	if err != nil {
		return spec, wire.Wrap(CodeBundleInvalid, "the bundle has no usable config.json", err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxConfigJSON+1))
	f.Close()
	if err != nil || len(b) > maxConfigJSON {
		return spec, wire.Wrap(CodeBundleInvalid, "config.json is unreadable or too large", err)
	}
	if err := decodeStrict(b, &spec, false); err != nil {
		return spec, wire.Wrap(CodeBundleInvalid, "config.json does not decode", err)
	}
	if spec.Process == nil {
		return spec, wire.Errorf(CodeBundleInvalid, "config.json has no process")
	}
	return spec, nil
}

// patchSpec applies p to spec (which has a process).
// ImageAnnotationPrefix is the only annotation prefix an image's labels
// may carry into a bundle (the OCI image-spec's informational keys,
// annotations.md); every other image label is dropped.
const ImageAnnotationPrefix = "org.opencontainers.image."

func patchSpec(spec *specs.Spec, p Patch) error {
	spec.Process.Terminal = p.Terminal
	// No process of the container gains privileges through exec
	// (set-user-ID files, file capabilities): umoci's default config says
	// so already; a bundle never runs without it.
	spec.Process.NoNewPrivileges = true
	fsize := false
	for _, r := range spec.Process.Rlimits {
		fsize = fsize || r.Type == "RLIMIT_FSIZE"
	}
	if !fsize {
		// The console log is the container's stdout and stderr, written by
		// the container itself: the file size limit is what bounds it
		// (the helper runs on demand, so no process of its own could).
		n := uint64(cmp.Or(p.FileSizeLimit, DefaultFileSizeLimit))
		spec.Process.Rlimits = append(spec.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_FSIZE", Hard: n, Soft: n})
	}
	if p.Args != nil {
		spec.Process.Args = append([]string(nil), p.Args...)
	}
	if p.Env != nil {
		spec.Process.Env = append([]string(nil), p.Env...)
	}
	if p.Cwd != "" {
		spec.Process.Cwd = p.Cwd
	}
	// umoci copies the image's labels into annotations, and runtimes obey
	// some annotations (crun's run.oci.*, e.g. run.oci.pidfd_receiver
	// makes crun, as root, connect to a host socket): an image must not
	// configure the runtime. Only the informational OCI image keys stay;
	// ownership annotations come from the caller alone.
	for k := range spec.Annotations {
		if !strings.HasPrefix(k, ImageAnnotationPrefix) || p.OwnedPrefix != "" && strings.HasPrefix(k, p.OwnedPrefix) {
			delete(spec.Annotations, k)
		}
	}
	if len(p.Annotations) > 0 && spec.Annotations == nil {
		spec.Annotations = make(map[string]string, len(p.Annotations))
	}
	for k, v := range p.Annotations {
		spec.Annotations[k] = v
	}
	if p.CgroupsPath != "" {
		if spec.Linux == nil {
			return wire.Errorf(CodeBundleInvalid, "config.json has no linux section for a cgroups path")
		}
		spec.Linux.CgroupsPath = p.CgroupsPath
		// A container gets a pids limit unless its config sets one: a
		// fork bomb inside must not exhaust the host's pid space.
		if spec.Linux.Resources == nil {
			spec.Linux.Resources = &specs.LinuxResources{}
		}
		if spec.Linux.Resources.Pids == nil {
			limit := int64(DefaultPidsLimit)
			spec.Linux.Resources.Pids = &specs.LinuxPids{Limit: &limit}
		}
		// And a memory limit: one container must not take the host's
		// memory. Swap is left as the runtime sets it.
		if spec.Linux.Resources.Memory == nil {
			spec.Linux.Resources.Memory = &specs.LinuxMemory{}
		}
		if spec.Linux.Resources.Memory.Limit == nil {
			limit := cmp.Or(p.MemoryLimit, DefaultMemoryLimit)
			spec.Linux.Resources.Memory.Limit = &limit
		}
	}
	return nil
}

// DefaultPidsLimit is the pids cgroup limit (processes and threads) of a
// helper-made bundle whose config sets none.
const DefaultPidsLimit = 1024

// DefaultMemoryLimit is the memory cgroup limit (bytes, 1 GiB) of a
// helper-made bundle whose config sets none (Patch.MemoryLimit).
const DefaultMemoryLimit = 1 << 30

// DefaultFileSizeLimit is the RLIMIT_FSIZE (bytes, 64 MiB, soft = hard)
// of a bundle whose config sets none (Patch.FileSizeLimit): a write past
// it fails with EFBIG after SIGXFSZ, whose default action ends the
// process. It applies to every file the container writes: its console
// log, files under /tmp, any writable mount.
const DefaultFileSizeLimit = 64 << 20

// writeConfigAt writes spec as dirfd/config.json (0600) in a directory the
// caller just made (so the exclusive create cannot meet an old file),
// without fsync: the runtime reads it at create, right after this, from
// the page cache. A crash before it reaches the disk loses a bundle whose
// container did not survive the crash either; recovery then removes the
// bundle. Errors: CodeBundleInvalid.
func writeConfigAt(dirfd int, spec *specs.Spec) error {
	out, err := json.Marshal(spec)
	if err != nil {
		return wire.Wrap(CodeBundleInvalid, "config.json does not encode", err)
	}
	f, err := createAt(dirfd, "config.json")
	if err != nil {
		return wire.Wrap(CodeBundleInvalid, "cannot write config.json", err)
	}
	_, err = f.Write(out)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return wire.Wrap(CodeBundleInvalid, "cannot write config.json", err)
	}
	return nil
}

// writeAtomicAt replaces dirfd/name with data: a 0600 temporary file in the
// same directory, fsync, rename over name, fsync of the directory.
// Errors: CodeBundleInvalid.
func writeAtomicAt(dirfd int, name string, data []byte) error {
	tmp := "." + name + ".tmp-" + randHex(8)
	f, err := createAt(dirfd, tmp)
	if err != nil {
		return wire.Wrap(CodeBundleInvalid, "cannot write "+name, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o600) // explicit, whatever the umask
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dirfd, tmp, dirfd, name)
	}
	if err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return wire.Wrap(CodeBundleInvalid, "cannot write "+name, err)
	}
	if err := unix.Fsync(dirfd); err != nil {
		return wire.Wrap(CodeBundleInvalid, "cannot sync the bundle directory", err)
	}
	return nil
}
