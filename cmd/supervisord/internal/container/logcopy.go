package container

import (
	"path/filepath"

	"hostkit.dev/lib/api/helperapi"

	"hostkit.dev/cmd/supervisord/internal/store"
)

// keepLog replaces dir's output.log (FileLog) with data, the container's
// console output: atomically and durably, 0600, at most its last
// helperapi.MaxLogBytes (1 MiB) whatever the helper sent. Stop calls it
// twice: with the container.logs copy taken before the delete (the
// fallback), then with the delete answer's log tail, read by the helper
// after the container stopped, which holds everything the copy held (the
// same file, only appended to, its last MiB) and what the container
// wrote while it handled SIGTERM.
func keepLog(dir string, data []byte) error {
	if len(data) > helperapi.MaxLogBytes {
		data = data[len(data)-helperapi.MaxLogBytes:]
	}
	return store.WriteFile(filepath.Join(dir, FileLog), data, 0o600)
}
