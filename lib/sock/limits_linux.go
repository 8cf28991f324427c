package sock

// MaxPathLen is the longest socket path, in bytes, that bind(2) accepts on
// this platform: Linux's sun_path holds 108 bytes including the terminating
// NUL (unix(7)), so 107.
const MaxPathLen = 107
