package audit

import (
	"errors"
	"io/fs"
	"os"

	"hostkit.dev/lib/wire"
)

// ReadTail returns up to the last n records of the log name in dir, oldest
// first, reading the active file and then rotated files as needed. It does
// not verify the chain (see Verify) and skips lines that do not parse,
// such as a torn tail. Errors: `audit.io`.
func ReadTail(dir, name string, n int) ([]Record, error) {
	files, err := listFiles(dir, name)
	if err != nil {
		return nil, wire.Wrap(CodeIO, "cannot list the audit directory", err)
	}
	var out []Record
	for i := len(files) - 1; i >= 0 && len(out) < n; i-- {
		f, err := os.Open(files[i].path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // rotated away meanwhile
		}
		if err != nil {
			return nil, wire.Wrap(CodeIO, "cannot open the audit log", err)
		}
		lines, err := lastLines(f, n-len(out))
		f.Close()
		if err != nil {
			return nil, wire.Wrap(CodeIO, "cannot read the audit log", err)
		}
		var recs []Record
		for _, line := range lines {
			if r, err := parseLine(line); err == nil {
				recs = append(recs, r)
			}
		}
		out = append(recs, out...)
	}
	return out, nil
}
