package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// WriteJSON writes v to path atomically and durably (temp file 0600 in
// the same directory, fsync, rename, fsync of the directory).
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(path, append(b, '\n'), 0o600)
}

// WriteJSONAtomic writes v to path atomically (temp file 0600, rename)
// without fsync: every process sees the old or the new file, also after a
// crash of any process, but a host crash may lose it (docs/supervisord.md,
// "Durability"). Use it only for records that die with the host anyway,
// or call SyncAll before relying on it.
func WriteJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, append(b, '\n'), 0o600, false)
}

// WriteFile writes data to path atomically and durably with mode perm
// (set explicitly, whatever the umask).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return writeFile(path, data, perm, true)
}

// WriteFileAtomic is WriteFile without fsync; SyncAll makes it durable.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeFile(path, data, perm, false)
}

// SyncAll fsyncs every path (files or directories) at once, one goroutine
// each, and returns the first error. Every write and rename the paths must
// cover has to be complete when it is called. On a journalling file system
// concurrent fsyncs share a journal commit, where a sequence pays one
// commit or cache flush each.
func SyncAll(paths ...string) error {
	errs := make(chan error, len(paths))
	for _, p := range paths {
		go func() { errs <- fsync(p) }()
	}
	var first error
	for range paths {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func fsync(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("store.SyncAll: %w", err)
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return fmt.Errorf("store.SyncAll: %w", err)
	}
	return nil
}

func writeFile(path string, data []byte, perm os.FileMode, durable bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("store.WriteFile: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if durable {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	if !durable {
		return nil
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// EncodeEnv renders an environment as agent.env: KEY=VALUE lines, sorted.
// Keys and values must not hold NUL or newline, keys not '='.
func EncodeEnv(env map[string]string) ([]byte, error) {
	keys := make([]string, 0, len(env))
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00\n") || strings.ContainsAny(v, "\x00\n") {
			return nil, errors.New("store: environment key or value with NUL, newline or '='")
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + env[k] + "\n")
	}
	return []byte(b.String()), nil
}

// ReadEnv reads an agent.env file into KEY=VALUE strings (exec form).
func ReadEnv(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line != "" {
			out = append(out, line)
		}
	}
	return out, nil
}
