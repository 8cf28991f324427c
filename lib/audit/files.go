package audit

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// logFile is one file of a log: the active file (n = 0) or a rotated one,
// with its file info as listed.
type logFile struct {
	path string
	n    int
	info fs.FileInfo
}

// rotatedPath returns the path of rotated file n (name.n).
func rotatedPath(dir, name string, n int) string {
	return filepath.Join(dir, name+"."+strconv.Itoa(n))
}

// listFiles returns the files of the log in dir, oldest first: rotated files
// from the highest number down, then the active file if it exists.
func listFiles(dir, name string) ([]logFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []logFile
	var active fs.FileInfo
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		if e.Name() == name {
			active = info
			continue
		}
		suffix, ok := strings.CutPrefix(e.Name(), name+".")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(suffix); err == nil && n > 0 && strconv.Itoa(n) == suffix {
			out = append(out, logFile{filepath.Join(dir, e.Name()), n, info})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n > out[j].n })
	if active != nil {
		out = append(out, logFile{filepath.Join(dir, name), 0, active})
	}
	return out, nil
}

// readAt reads exactly [start, end) of f.
func readAt(f *os.File, start, end int64) ([]byte, error) {
	b := make([]byte, end-start)
	_, err := f.ReadAt(b, start)
	return b, err
}

// lineStart returns the offset just after the last '\n' in [0, end) of f,
// or 0 if there is none.
func lineStart(f *os.File, end int64) (int64, error) {
	chunk := int64(4096)
	for hi := end; hi > 0; {
		lo := max(0, hi-chunk)
		b, err := readAt(f, lo, hi)
		if err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return lo + int64(i) + 1, nil
		}
		hi = lo
		chunk *= 2
	}
	return 0, nil
}

// completeEnd returns the end of f's last complete line (the offset after
// its '\n') and whether bytes without a final newline (a torn line) follow.
func completeEnd(f *os.File) (end int64, torn bool, err error) {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, false, err
	}
	size := st.Size()
	last, err := readAt(f, size-1, size)
	if err != nil || last[0] == '\n' {
		return size, false, err
	}
	end, err = lineStart(f, size)
	return end, true, err
}

// lastLines returns up to n complete lines (without newlines) that end f,
// oldest first, ignoring a torn tail.
func lastLines(f *os.File, n int) ([][]byte, error) {
	end, _, err := completeEnd(f)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for end > 0 && len(out) < n {
		start, err := lineStart(f, end-1)
		if err != nil {
			return nil, err
		}
		line, err := readAt(f, start, end-1)
		if err != nil {
			return nil, err
		}
		out = append(out, line)
		end = start
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// eachLine calls fn for every line of r with its 1-based number and whether
// it ended with a newline; the line excludes the newline and is only valid
// during the call.
func eachLine(r io.Reader, fn func(n int, line []byte, nl bool) error) error {
	br := newLineReader(r)
	for n := 1; ; n++ {
		line, nl, err := br.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(n, line, nl); err != nil {
			return err
		}
	}
}
