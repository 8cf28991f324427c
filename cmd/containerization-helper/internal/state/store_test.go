package state

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestOpenInitialises(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := stateDir(t)
	s := open(t, dir, Options{})
	is.True(ValidUUID(s.ProjectID()))
	fi, err := os.Stat(dir)
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o700))
	fi, err = os.Stat(filepath.Join(dir, FileName))
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o600))
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	is.NoErr(err)
	is.True(strings.Contains(string(b), `"schema":1`))
	p := s.ProjectID()
	is.NoErr(s.Close())
	s = open(t, dir, Options{})
	is.Equal(s.ProjectID(), p) // stable across restarts
	_, err = s.Fence(inst1)
	is.NoErr(err)
	is.NoErr(s.Close())
	_, err = s.Fence(inst1)
	isCode(t, err, CodeClosed)
	_, err = s.AdvanceFence(inst1)
	isCode(t, err, CodeClosed)
}

func TestNewUUID(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	seen := map[string]bool{}
	for range 100 {
		u := NewUUID()
		is.True(ValidUUID(u))
		is.Equal(u[14], byte('4'))
		is.True(strings.ContainsRune("89ab", rune(u[19])))
		is.True(!seen[u])
		seen[u] = true
	}
	for _, bad := range []string{"", "6F1C2A9E-3B4D-4E5F-8A7B-9C0D1E2F3A4B", "6f1c2a9e3b4d4e5f8a7b9c0d1e2f3a4b", "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4g", "{6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b}"} {
		is.True(!ValidUUID(bad))
	}
}

// Everything but plans (volatile by design) survives a reopen.
func TestReopenPreservesEverything(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := stateDir(t)
	c := newClock()
	s := open(t, dir, Options{Now: c.Now})
	_, err := s.AdvanceFence(inst1)
	is.NoErr(err)
	is.NoErr(s.RaiseFence(inst2, 9))
	is.NoErr(s.PutIdem("uid0/container.create/k1", "container.create", "h1", []byte{0, 1, 2, 0xff}))
	is.NoErr(s.PutIdem("\xff\x00binary key", "container.start", "h2", nil))
	is.NoErr(s.PutPlan(Plan{Hash: "sha256:ab", Contents: []byte("plan"), Expires: c.Now().Add(time.Minute)}))
	want := Container{ID: "hk-0123456789abcdef", Instance: inst1, Bundle: "/b/hk-0123456789abcdef", ConsoleLog: "/b/log",
		Fence: 1, PlanHash: "sha256:ab", Phase: PhaseRunning}
	is.NoErr(s.PutContainer(want))
	p := s.ProjectID()
	is.NoErr(s.Close())

	s = open(t, dir, Options{Now: c.Now})
	is.Equal(s.ProjectID(), p)
	n, _ := s.Fence(inst1)
	is.Equal(n, uint64(1))
	n, _ = s.Fence(inst2)
	is.Equal(n, uint64(9))
	r, ok, err := s.Idem("uid0/container.create/k1", "container.create", "h1")
	is.NoErr(err)
	is.True(ok)
	is.Equal(r, []byte{0, 1, 2, 0xff})
	_, ok, err = s.Idem("\xff\x00binary key", "container.start", "h2")
	is.NoErr(err)
	is.True(ok)
	_, err = s.Plan("sha256:ab") // plans live in memory: a restart forgets them
	isCode(t, err, CodePlanUnknown)
	got, ok, err := s.Container(want.ID)
	is.NoErr(err)
	is.True(ok)
	want.Updated = c.Now().Truncate(time.Millisecond)
	is.True(got.Updated.Equal(want.Updated))
	got.Updated = want.Updated
	is.Equal(got, want)
	is.Equal(len(s.Recovering()), 0) // running is settled
}

func TestDirAndLock(t *testing.T) {
	t.Parallel()
	t.Run("locked", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		dir := stateDir(t)
		s := open(t, dir, Options{})
		_, err := Open(dir, Options{})
		isCode(t, err, CodeLocked)
		is.NoErr(s.Close())
		open(t, dir, Options{})
	})
	t.Run("group readable", func(t *testing.T) {
		t.Parallel()
		dir := stateDir(t)
		if err := os.Mkdir(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir, Options{})
		isCode(t, err, CodeDirUnsafe)
	})
	t.Run("symlink", func(t *testing.T) {
		t.Parallel()
		real := stateDir(t)
		if err := os.Mkdir(real, 0o700); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		_, err := Open(link, Options{})
		isCode(t, err, CodeDirUnsafe)
	})
	t.Run("state.json symlink", func(t *testing.T) {
		t.Parallel()
		dir := stateDir(t)
		s := open(t, dir, Options{})
		s.Close()
		elsewhere := filepath.Join(t.TempDir(), "x.json")
		if err := os.Rename(filepath.Join(dir, FileName), elsewhere); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, filepath.Join(dir, FileName)); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir, Options{})
		isCode(t, err, CodeDirUnsafe)
	})
}

// A torn temporary file (a crash between create and rename) is removed;
// the last durable state.json is what Open reads.
func TestTornTempFileIgnored(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := stateDir(t)
	s := open(t, dir, Options{})
	_, err := s.AdvanceFence(inst1)
	is.NoErr(err)
	p := s.ProjectID()
	s.Close()
	good, err := os.ReadFile(filepath.Join(dir, FileName))
	is.NoErr(err)
	torn := filepath.Join(dir, tmpPrefix+"123456")
	is.NoErr(os.WriteFile(torn, good[:len(good)/2], 0o600))
	s = open(t, dir, Options{})
	is.Equal(s.ProjectID(), p)
	n, _ := s.Fence(inst1)
	is.Equal(n, uint64(1))
	_, err = os.Stat(torn)
	is.True(os.IsNotExist(err))
}

// Unreadable documents are refused with a typed code and left untouched.
func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	const proj = `"project":"6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"`
	tests := []struct {
		name, body, code string
	}{
		{"schema 2", `{"schema":2,` + proj + `}`, CodeSchemaUnsupported},
		{"schema missing", `{` + proj + `}`, CodeSchemaUnsupported},
		{"schema string", `{"schema":"1",` + proj + `}`, CodeSchemaUnsupported},
		{"duplicate key", `{"schema":1,"schema":1,` + proj + `}`, CodeCorrupt},
		{"case variant key", `{"schema":1,"Project":"x",` + proj + `}`, CodeCorrupt},
		{"nested duplicate", `{"schema":1,` + proj + `,"fences":{"` + inst1 + `":1,"` + inst1 + `":2}}`, CodeCorrupt},
		{"unknown field", `{"schema":1,` + proj + `,"extra":true}`, CodeCorrupt},
		{"truncated", `{"schema":1,` + proj, CodeCorrupt},
		{"trailing data", `{"schema":1,` + proj + `} {}`, CodeCorrupt},
		{"not an object", `[1]`, CodeCorrupt},
		{"empty", ``, CodeCorrupt},
		{"bad project", `{"schema":1,"project":"nope"}`, CodeCorrupt},
		{"bad phase", `{"schema":1,` + proj + `,"containers":{"c1":{"instance":"` + inst1 + `","phase":"flying"}}}`, CodeCorrupt},
		{"bad container id", `{"schema":1,` + proj + `,"containers":{"-c":{"instance":"` + inst1 + `","phase":"created"}}}`, CodeCorrupt},
		{"unsorted idempotency", `{"schema":1,` + proj + `,"idempotency":[{"key":"Yg==","op":"o","request_hash":"h"},{"key":"YQ==","op":"o","request_hash":"h"}]}`, CodeCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			dir := stateDir(t)
			is.NoErr(os.Mkdir(dir, 0o700))
			path := filepath.Join(dir, FileName)
			is.NoErr(os.WriteFile(path, []byte(tt.body), 0o600))
			_, err := Open(dir, Options{})
			isCode(t, err, tt.code)
			b, err := os.ReadFile(path)
			is.NoErr(err)
			is.Equal(string(b), tt.body) // never replaced
		})
	}
}

func TestConcurrentMutations(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := stateDir(t)
	s := open(t, dir, Options{})
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.AdvanceFence(inst1); err != nil {
					t.Error(err)
				}
				if err := s.PutIdem(fmt.Sprintf("w%d-%d", w, i), "op", "h", []byte{byte(i)}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	s.Close()
	s = open(t, dir, Options{})
	n, _ := s.Fence(inst1)
	is.Equal(n, uint64(workers*each))
	for w := range workers {
		for i := range each {
			r, ok, err := s.Idem(fmt.Sprintf("w%d-%d", w, i), "op", "h")
			is.NoErr(err)
			is.True(ok)
			is.Equal(r, []byte{byte(i)})
		}
	}
}

// A write that fails (here: state.wal replaced by a directory, so the
// write-ahead slot cannot be written) rolls memory back and stops further
// mutations.
func TestWriteFailureStopsMutations(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := stateDir(t)
	s := open(t, dir, Options{})
	_, err := s.AdvanceFence(inst1)
	is.NoErr(err)
	path := filepath.Join(dir, walName)
	is.NoErr(os.Remove(path))
	is.NoErr(os.Mkdir(path, 0o700))
	_, err = s.AdvanceFence(inst1)
	isCode(t, err, CodeIO)
	n, _ := s.Fence(inst1)
	is.Equal(n, uint64(1)) // rolled back
	is.NoErr(os.Remove(path))
	err = s.PutIdem("k", "op", "h", nil)
	isCode(t, err, CodeIO) // refused until reopened
	ents, err := os.ReadDir(dir)
	is.NoErr(err)
	for _, e := range ents {
		is.True(!strings.HasPrefix(e.Name(), tmpPrefix)) // no temp file left
	}
}

func TestCaps(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c := newClock()
	s := open(t, stateDir(t), Options{Now: c.Now, MaxIdem: 2, MaxPlans: 1, IdemTTL: time.Minute})
	is.NoErr(s.PutIdem("a", "op", "h", nil))
	is.NoErr(s.PutIdem("b", "op", "h", nil))
	isCode(t, s.PutIdem("c", "op", "h", nil), CodeFull)
	c.Add(2 * time.Minute) // a and b expire: room again
	is.NoErr(s.PutIdem("c", "op", "h", nil))
	is.NoErr(s.PutPlan(Plan{Hash: "p1", Expires: c.Now().Add(time.Minute)}))
	// A full plan table evicts the oldest unconsumed plan: a flood of
	// plans can never stop everyone from planning.
	c.Add(time.Millisecond)
	is.NoErr(s.PutPlan(Plan{Hash: "p2", Expires: c.Now().Add(time.Minute)}))
	_, err := s.Plan("p1")
	isCode(t, err, CodePlanUnknown)
	_, err = s.Plan("p2")
	is.NoErr(err)
	isCode(t, s.PutIdem("k", "op", "h", make([]byte, maxResultBytes+1)), CodeInvalid)

	small := open(t, stateDir(t), Options{MaxFileBytes: 1024})
	isCode(t, small.PutIdem("big", "op", "h", make([]byte, 2048)), CodeFull)
	is.NoErr(small.PutIdem("small", "op", "h", nil)) // CodeFull did not stop the store
	_, ok, _ := small.Idem("big", "op", "h")
	is.True(!ok)
}
