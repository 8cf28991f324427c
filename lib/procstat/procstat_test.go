package procstat

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestParse(t *testing.T) {
	t.Parallel()
	file := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	fields := func(n int) string { // a line of n fields, each field k holding k
		var b strings.Builder
		b.WriteString("1 (x)")
		for k := 3; k <= n; k++ {
			b.WriteString(" " + strconv.Itoa(k))
		}
		return strings.Replace(b.String(), " 3 ", " S ", 1)
	}
	cases := []struct {
		name string
		in   string
		want Stat
		ok   bool
	}{
		{"running", file("cat.stat"), Stat{State: 'R', PPID: 26916, PGRP: 26916, Session: 27868, StartTime: 248781}, true},
		{"kernel thread", file("kworker.stat"), Stat{State: 'I', PPID: 2, StartTime: 20}, true},
		{"zombie, comm with spaces and parentheses", file("zombie.stat"),
			Stat{State: 'Z', PPID: 4200, PGRP: 4242, Session: 4242, StartTime: 987654, ExitCode: 768}, true},
		{"no field 52", file("no-exit-code.stat"), Stat{State: 'S', PPID: 1, PGRP: 77, Session: 77, StartTime: 1234, ExitCode: -1}, true},
		{"exactly 22 fields", fields(22), Stat{State: 'S', PPID: 4, PGRP: 5, Session: 6, StartTime: 22, ExitCode: -1}, true},
		{"52 fields", fields(52), Stat{State: 'S', PPID: 4, PGRP: 5, Session: 6, StartTime: 22, ExitCode: 52}, true},
		{"more than 52 fields", fields(60), Stat{State: 'S', PPID: 4, PGRP: 5, Session: 6, StartTime: 22, ExitCode: 52}, true},
		{"largest start time", strings.Replace(fields(22), " 22", " 18446744073709551615", 1),
			Stat{State: 'S', PPID: 4, PGRP: 5, Session: 6, StartTime: math.MaxUint64, ExitCode: -1}, true},

		{"empty", "", Stat{}, false},
		{"no closing parenthesis", "1 (x S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", Stat{}, false},
		{"21 fields", fields(21), Stat{}, false},
		{"no fields after the name", "1 (x)", Stat{}, false},
		{"two-byte state", strings.Replace(fields(22), " S ", " SS ", 1), Stat{}, false},
		{"signed ppid", strings.Replace(fields(22), " 4 ", " -4 ", 1), Stat{}, false},
		{"plus-signed session", strings.Replace(fields(22), " 6 ", " +6 ", 1), Stat{}, false},
		{"hex pgrp", strings.Replace(fields(22), " 5 ", " 0x5 ", 1), Stat{}, false},
		{"start time over 64 bits", strings.Replace(fields(22), " 22", " 18446744073709551616", 1), Stat{}, false},
		{"exit code not a number", strings.Replace(fields(52), " 52", " 5x", 1), Stat{}, false},
		{"a ')' in the last field moves the fields", fields(52) + ")", Stat{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, err := Parse([]byte(tc.in))
			if !tc.ok {
				is.True(errors.Is(err, ErrMalformed))
				return
			}
			is.NoErr(err)
			is.Equal(got, tc.want)
		})
	}
}

func TestExited(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		state byte
		want  bool
	}{
		{"zombie", 'Z', true},
		{"dead", 'X', true},
		{"running", 'R', false},
		{"sleeping", 'S', false},
		{"stopped", 'T', false},
		{"unset", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is.New(t).Equal(Stat{State: tc.state}.Exited(), tc.want)
		})
	}
}

// reference parses a stat line the plain way (split into fields, then
// strconv), for FuzzParse to hold Parse to.
func reference(b []byte) (Stat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, false
	}
	f := bytes.FieldsFunc(b[i+1:], func(r rune) bool { return r < 0x80 && strings.ContainsRune(" \t\n\v\f\r", r) })
	if len(f) < minFields-2 || len(f[0]) != 1 {
		return Stat{}, false
	}
	num := func(k int) (uint64, bool) { // field k, 1-based as in proc(5)
		v, err := strconv.ParseUint(string(f[k-3]), 10, 64)
		return v, err == nil
	}
	s := Stat{State: f[0][0], ExitCode: -1}
	for k, dst := range map[int]*int{4: &s.PPID, 5: &s.PGRP, 6: &s.Session, 52: &s.ExitCode} {
		if k-3 >= len(f) {
			continue
		}
		v, ok := num(k)
		if !ok || v > math.MaxInt {
			return Stat{}, false
		}
		*dst = int(v)
	}
	var ok bool
	if s.StartTime, ok = num(22); !ok {
		return Stat{}, false
	}
	return s, true
}

func FuzzParse(f *testing.F) {
	ents, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".stat" {
			b, err := os.ReadFile(filepath.Join("testdata", e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Parse(b)
		want, ok := reference(b)
		if ok != (err == nil) || got != want {
			t.Fatalf("Parse(%q) = %+v, %v; the plain parse gives %+v, %v", b, got, err, want, ok)
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v is not ErrMalformed", err)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	line, err := os.ReadFile(filepath.Join("testdata", "cat.stat"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(line); err != nil {
			b.Fatal(err)
		}
	}
}
