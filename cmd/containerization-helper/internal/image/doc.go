// Package image reads local OCI image layouts (OCI image-spec v1.1,
// image-layout.md) and unpacks one verified image into an OCI runtime
// bundle. It never pulls, builds or pushes.
//
// Selection. An image is chosen from the layout's index.json by manifest
// digest only: with no digest, the index must hold exactly one manifest
// (several are CodeAmbiguous); with a digest, the entry whose digest
// equals it (none is CodeNotFound). A tag (the
// org.opencontainers.image.ref.name annotation) never selects anything;
// Evidence.Refs reports the tags as information.
//
// Verification (Verify) goes blob by blob: the manifest, its config and
// every layer must exist as a regular file at blobs/sha256/<hex> inside the
// layout (each path component opened with O_NOFOLLOW relative to its
// parent, so a symlink or a path that would leave the layout is refused),
// have the declared size, and hash to the declared digest (streamed,
// never more than the declared size plus one byte read). Only sha256 and
// the OCI manifest, config and tar / tar+gzip layer media types are
// accepted. Documents are decoded strictly: one JSON value, no duplicate
// object keys (compared the way encoding/json matches names, so "a" and
// "A" collide), caps on every size; index and manifest refuse unknown
// fields (a field this package does not understand could change what the
// image means), the image config tolerates them (Docker-built configs carry
// legacy fields that do not affect the rootfs).
//
// Unpacking (Unpacker.Unpack) runs `umoci unpack` through lib/procexec.
// This umoci (0.4.7) addresses an image only as `path[:tag]` and refuses
// `path@sha256:...`, so the helper never lets umoci resolve the caller's
// layout: it copies the verified blobs (hashing the copy as it writes it)
// into a private staging layout under the bundle root (decompressing
// each layer and walking its tar stream on the way, without writing it,
// to refuse with CodeTooLarge an image that would unpack to more than
// Limits.MaxUnpackedBytes; see layerMeter), writes that
// layout's oci-layout and an index.json that holds exactly one descriptor
// (the verified manifest, tagged with a random helper-generated name), and
// runs `umoci unpack --image <stage>:<tag> <bundle>` from the bundle root
// (a working directory pinned by descriptor). A tag in the caller's layout
// therefore cannot select anything, and the staged tag can name only the
// verified manifest. Afterwards the bundle's umoci.json must name that
// manifest digest as the only step of its descriptor walk
// (CodeUnpackMismatch otherwise), and config.json is patched (terminal,
// args, env, cwd, ownership annotations, noNewPrivileges, a default
// RLIMIT_FSIZE and, with a cgroups path, default pids and memory limits)
// and rewritten atomically, 0600.
// The staging layout is removed whatever happens; a bundle that fails any
// later step is removed too.
//
// Shared rootfs (Unpacker.Prepare, what the helper uses). Unpacking costs
// as much as creating the container, so Prepare unpacks each verified
// manifest once into a cache entry (<cache>/<manifest hex>/, filled the
// same way through .fill-<random> and renamed only once umoci.json names
// the manifest and the mount points exist) and gives each bundle only its
// own config.json: root.path is the entry's rootfs with root.readonly set
// (the runtime mounts it read-only in the container, so no container can
// change what another runs), a tmpfs at /tmp is the writable space, and
// Patch.CgroupsPath names the container's cgroup. Its verification skips
// hashing a layer whose file is unchanged (device, inode, size, mtime,
// ctime) since it hashed right in this Unpacker (hashCache); bytes that
// are unpacked are always hashed as they are copied. PruneCache and
// CacheEntryOf let the owner drop entries nothing uses.
//
// Reading for a peer (Reader; VerifyFor, Request.Reader). The helper runs
// as root; for a non-root peer it reads a layout only as far as that peer
// could read it itself (search on every directory of the path, read and
// search on the layout, read on each file it opens; POSIX mode bits, ACL
// grants not honoured), checked by fstat on each descriptor it opens and
// then uses. A missing layout or file and one the peer may not read give
// the same code and message. ReaderOf builds the Reader from the
// connection's credentials and /proc/<pid>/status.
//
// Every error is a *wire.Error with one of the codes below (or procexec's
// codes inside CodeUnpackFailed's cause).
package image

// Error codes (stable `area.reason` strings, append-only; each is listed in
// docs/protocol.md, containerization-helper section).
const (
	// CodeAmbiguous: the index holds several manifests and no digest was
	// given.
	CodeAmbiguous = "image.ambiguous"
	// CodeBlobMissing: a blob the manifest or index names is not in the
	// layout (for a non-root Reader: or it may not read it).
	CodeBlobMissing = "image.blob_missing"
	// CodeBlobUnsafe: a blob, blobs/ or blobs/sha256/ is a symlink, or not
	// a regular file / directory.
	CodeBlobUnsafe = "image.blob_unsafe"
	// CodeCancelled: the caller's context ended during verification or
	// unpacking; nothing was kept (the staging layout and a partial bundle
	// are removed).
	CodeCancelled = "image.cancelled"
	// CodeBundleExists: the bundle directory already exists.
	CodeBundleExists = "image.bundle_exists"
	// CodeBundleInvalid: the unpacked bundle's config.json is missing,
	// unsafe or does not decode, or a patch value is invalid.
	CodeBundleInvalid = "image.bundle_invalid"
	// CodeDigestMismatch: a blob's content does not hash to its digest.
	CodeDigestMismatch = "image.digest_mismatch"
	// CodeInvalid: the layout, index, manifest or config breaks the image
	// spec or this package's strict decoding (duplicate or unknown keys,
	// wrong schemaVersion, malformed digest, inconsistent descriptors).
	CodeInvalid = "image.invalid"
	// CodeNotFound: the layout, its oci-layout or index.json is missing
	// (for a non-root Reader: or it may not read it), the index is empty,
	// or no index entry has the requested digest.
	CodeNotFound = "image.not_found"
	// CodePathUnsafe: the bundle root or name is not safe (relative,
	// unclean, a symlink, not owned by this user, group/world writable, a
	// name outside [a-z0-9][a-z0-9_.-]{0,63} or containing "..").
	CodePathUnsafe = "image.path_unsafe"
	// CodeSizeMismatch: a blob's size differs from its descriptor's.
	CodeSizeMismatch = "image.size_mismatch"
	// CodeTooLarge: a document, blob, layer count or total passes a limit,
	// or the layers would unpack to more than Limits.MaxUnpackedBytes
	// (found while they are copied for an unpack, before umoci runs).
	CodeTooLarge = "image.too_large"
	// CodeUnpackFailed: umoci could not unpack the staged image (its
	// procexec error is the cause); the bundle was removed.
	CodeUnpackFailed = "image.unpack_failed"
	// CodeUnpackMismatch: the bundle's umoci.json does not name exactly the
	// verified manifest; the bundle was removed.
	CodeUnpackMismatch = "image.unpack_mismatch"
	// CodeUnsupported: a valid but unsupported construct (a digest
	// algorithm other than sha256, a nested index, zstd or
	// non-distributable layers, urls or embedded data in a descriptor).
	CodeUnsupported = "image.unsupported"
)

// Codes lists every code above in sorted order; a test keeps it sorted,
// unique and documented.
var Codes = []string{
	CodeAmbiguous,
	CodeBlobMissing,
	CodeBlobUnsafe,
	CodeBundleExists,
	CodeBundleInvalid,
	CodeCancelled,
	CodeDigestMismatch,
	CodeInvalid,
	CodeNotFound,
	CodePathUnsafe,
	CodeSizeMismatch,
	CodeTooLarge,
	CodeUnpackFailed,
	CodeUnpackMismatch,
	CodeUnsupported,
}
