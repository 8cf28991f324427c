package sock

// MaxPathLen is the longest socket path, in bytes, that bind(2) accepts on
// this platform: macOS's sun_path holds 104 bytes including the terminating
// NUL, so 103.
const MaxPathLen = 103
