package container

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/helperapi"
)

// A delete's answer with a log tail replaces the copy taken before the
// delete; an answer without one (an older helper, a replayed answer, a
// delete that found the container gone) leaves the copy as it is; a tail
// longer than helperapi.MaxLogBytes keeps its last MiB only.
func TestDeleteAnswerKeepsLog(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte("0123456789abcdef"), helperapi.MaxLogBytes/16+1)
	for _, tc := range []struct {
		name  string
		a     answer
		want  []byte
		saved bool
	}{
		{"tail", answer{Deleted: true, HasLogTail: true, LogTail: []byte("up\nbye\n")}, []byte("up\nbye\n"), true},
		{"empty tail", answer{Deleted: true, HasLogTail: true}, []byte{}, true},
		{"no tail", answer{Deleted: true}, []byte("pre-copy\n"), false},
		{"no tail, stray bytes", answer{Deleted: true, LogTail: []byte("ignored")}, []byte("pre-copy\n"), false},
		{"gone already", answer{}, []byte("pre-copy\n"), false},
		{"oversized tail", answer{Deleted: true, HasLogTail: true, LogTail: big}, big[len(big)-helperapi.MaxLogBytes:], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			dir := t.TempDir()
			is.NoErr(keepLog(dir, []byte("pre-copy\n")))
			s := &session{dir: dir, rec: &Record{Fence: 1, ContainerID: "hk-0123456789abcdef", Done: []string{StepCreate, StepStart}}}
			s.done(StepDelete, &tc.a)
			b, err := os.ReadFile(filepath.Join(dir, FileLog))
			is.NoErr(err)
			is.True(bytes.Equal(b, tc.want))
			is.Equal(s.rec.LogSaved, tc.saved)
			is.True(s.rec.Deleted())
			fi, err := os.Stat(filepath.Join(dir, FileLog))
			is.NoErr(err)
			is.Equal(fi.Mode().Perm(), os.FileMode(0o600))
		})
	}
}
