package codec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"hostkit.dev/lib/wire"
)

// Fuzz targets, one per decoder. Seeds: every fixture of the codec's line
// (f.Add) and testdata/fuzz/<target>/ (malformed variants). The property:
// no panic; an error is always CodeDecode (or CodeIncompatible where the
// verb does not exist); a success is a document encoding/json also accepts,
// and satisfies the codec's invariants.

// seedFixtures adds every fixture of line to f.
func seedFixtures(f *testing.F, line string) {
	paths, _ := filepath.Glob(filepath.Join("testdata", line, "*"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// checkErr fails unless err is nil or carries one of codes.
func checkErr(t *testing.T, err error, codes ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, c := range codes {
		if wire.HasCode(err, c) {
			return
		}
	}
	t.Fatalf("unexpected error %v", err)
}

// checkAccepted fails unless b is valid JSON for encoding/json too.
func checkAccepted(t *testing.T, b []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("accepted what encoding/json refuses: %v", err)
	}
}

// checkState checks a decoded state's invariants.
func checkState(t *testing.T, s State) {
	t.Helper()
	if s.ID == "" || s.Bundle == "" || !statuses[s.Status] {
		t.Fatalf("invalid state %+v", s)
	}
	if s.Status == "stopped" && s.Pid != 0 || (s.Status == "running" || s.Status == "created" || s.Status == "paused") && s.Pid <= 0 {
		t.Fatalf("pid %d contradicts status %s", s.Pid, s.Status)
	}
	if s.Pid < 0 || s.Pid > maxPid {
		t.Fatalf("pid %d out of range", s.Pid)
	}
}

func fuzzState(f *testing.F, c Codec) {
	seedFixtures(f, c.Line())
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := c.State(b)
		checkErr(t, err, CodeDecode)
		if err == nil {
			checkAccepted(t, b)
			checkState(t, s)
		}
	})
}

func fuzzList(f *testing.F, c Codec) {
	seedFixtures(f, c.Line())
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := c.List(b)
		checkErr(t, err, CodeDecode)
		if err != nil {
			return
		}
		checkAccepted(t, b)
		if l == nil {
			t.Fatal("nil list")
		}
		seen := map[string]bool{}
		for _, s := range l {
			checkState(t, s)
			if seen[s.ID] {
				t.Fatal("duplicate id accepted")
			}
			seen[s.ID] = true
			if !c.Features().ListAnnotations && s.Annotations != nil {
				t.Fatal("annotations in a list that has none")
			}
		}
	})
}

func fuzzPs(f *testing.F, c Codec) {
	seedFixtures(f, c.Line())
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := c.Ps(b)
		checkErr(t, err, CodeDecode)
		if err != nil {
			return
		}
		checkAccepted(t, b)
		if p == nil {
			t.Fatal("nil pid list")
		}
		for _, pid := range p {
			if pid <= 0 || pid > maxPid {
				t.Fatalf("pid %d accepted", pid)
			}
		}
	})
}

func FuzzRunc11State(f *testing.F) { fuzzState(f, runc11{}) }
func FuzzRunc11List(f *testing.F)  { fuzzList(f, runc11{}) }
func FuzzRunc11Ps(f *testing.F)    { fuzzPs(f, runc11{}) }
func FuzzCrun18State(f *testing.F) { fuzzState(f, crun18{}) }
func FuzzCrun18List(f *testing.F)  { fuzzList(f, crun18{}) }
func FuzzCrun18Ps(f *testing.F)    { fuzzPs(f, crun18{}) }

func FuzzCrun18StoredAnnotations(f *testing.F) {
	seedFixtures(f, "crun-1.8")
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := crun18{}.StoredAnnotations(b)
		checkErr(t, err, CodeDecode)
		if err == nil {
			checkAccepted(t, b)
		}
	})
}

func FuzzRunc11Events(f *testing.F) {
	seedFixtures(f, "runc-1.1")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := runc11{}.Events(b)
		checkErr(t, err, CodeDecode)
		if err == nil {
			checkAccepted(t, b)
			if s.ID == "" {
				t.Fatal("event without id accepted")
			}
		}
	})
}

func FuzzParseVersion(f *testing.F) {
	for _, line := range []string{"runc-1.1", "crun-1.8"} {
		b, err := os.ReadFile(filepath.Join("testdata", line, "version.txt"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(line[:4], b)
	}
	f.Fuzz(func(t *testing.T, runtime string, out []byte) {
		v, err := ParseVersion(runtime, out)
		checkErr(t, err, CodeDecode)
		if err != nil {
			return
		}
		if _, _, ok := splitVersion(v); !ok {
			t.Fatalf("accepted malformed version %q", v)
		}
		c, err := ForVersion(runtime, v)
		checkErr(t, err, CodeIncompatible)
		if err == nil && c.Runtime() != runtime {
			t.Fatalf("codec %s for %q", c.Line(), runtime)
		}
	})
}

func FuzzRuntimeError(f *testing.F) {
	f.Add([]byte(`{"level":"error","msg":"container does not exist","time":"2026-11-29T12:23:27Z"}` + "\n"))
	f.Add([]byte(`{"msg":"cannot open` + "`x`" + `","level":"error","time":"2026-11-29T12:23:47.421702Z"}`))
	f.Fuzz(func(t *testing.T, log []byte) {
		msg := RuntimeError(log)
		if len(msg) > maxMessage+3 {
			t.Fatalf("message of %d bytes", len(msg))
		}
		for _, r := range msg {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("control character in %q", msg)
			}
		}
	})
}
