//go:build !linux && !darwin

package sock

// hostkit authenticates every connection by the peer credentials the kernel
// reports (SO_PEERCRED on Linux, LOCAL_PEERCRED/LOCAL_PEERPID on macOS). This
// platform has no supported equivalent, so the package deliberately fails to
// build here rather than fall back to unauthenticated sockets.
var _ = unsupportedPlatform_sock_requires_linux_or_darwin
