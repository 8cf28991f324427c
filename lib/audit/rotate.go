package audit

import (
	"errors"
	"io/fs"
	"os"
)

// rotate renames the active file to Name.1, shifting Name.n to Name.n+1
// and deleting what would pass MaxFiles, then opens a fresh active file.
// l.mu is held. The chain continues: the next record's prev is the hash of
// the last record in the file just rotated.
func (l *Log) rotate() error {
	dir, name, max := l.opts.Dir, l.opts.Name, l.opts.MaxFiles
	if l.opts.Fsync == FsyncAlways {
		if err := l.f.Sync(); err != nil {
			return err
		}
	}
	l.files++
	if err := l.f.Close(); err != nil {
		return err
	}
	files, err := listFiles(dir, name)
	if err != nil {
		return err
	}
	for _, f := range files {
		if f.n >= max {
			if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	for n := max - 1; n >= 1; n-- {
		err := os.Rename(rotatedPath(dir, name, n), rotatedPath(dir, name, n+1))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.Rename(l.activePath(), rotatedPath(dir, name, 1)); err != nil {
		return err
	}
	if err := l.openActive(); err != nil {
		return err
	}
	if l.opts.Fsync == FsyncAlways {
		return syncDir(dir)
	}
	return nil
}

// syncDir makes renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
