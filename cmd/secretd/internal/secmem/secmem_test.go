package secmem

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"
)

func TestCopyFreeZeroes(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := New(slog.New(slog.DiscardHandler))
	src := []byte("canary-secmem-value")
	b, err := a.Copy(src)
	is.NoErr(err)
	is.Equal(b.Bytes(), src)
	is.Equal(b.Len(), len(src))
	is.Equal(a.Live(), int64(1))
	slotMem := b.s.mem // still mapped after Free: look at it
	b.Free()
	is.Equal(slotMem, make([]byte, len(slotMem))) // zeroed, whole slot
	is.Equal(b.Len(), 0)
	is.Equal(b.Bytes(), nil)
	is.Equal(a.Live(), int64(0))
	b.Free() // idempotent
	is.Equal(string(b.AppendTo([]byte("x"))), "x")
}

func TestClasses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ n, class int }{{1, 0}, {64, 0}, {65, 1}, {128, 1}, {129, 2}, {4096, 6}, {32769, 10}, {65536, 10}} {
		is.New(t).Equal(classOf(tt.n), tt.class) // n
		if MinSlot<<tt.class < tt.n {
			t.Fatalf("class %d too small for %d", tt.class, tt.n)
		}
	}
	is := is.New(t)
	a := New(nil)
	defer a.Close()
	_, err := a.Copy(make([]byte, ChunkSize+1))
	is.True(err != nil)
	big, err := a.Copy(bytes.Repeat([]byte{1}, ChunkSize))
	is.NoErr(err)
	is.Equal(big.Len(), ChunkSize)
	big.Free()
	// Slots are reused: many values cost one chunk per class.
	var bufs []*Buf
	for range 2000 {
		b, err := a.Copy([]byte("v"))
		is.NoErr(err)
		bufs = append(bufs, b)
	}
	for _, b := range bufs {
		b.Free()
	}
	a.mu.Lock()
	is.Equal(len(a.chunks), 3) // one 64 KiB slot, two chunks of 64 B slots
	a.mu.Unlock()
}

func TestZero(t *testing.T) {
	t.Parallel()
	b := []byte("canary")
	Zero(b)
	is.New(t).Equal(b, make([]byte, 6))
}

func TestEmpty(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := New(nil)
	b, err := a.Copy(nil)
	is.NoErr(err)
	is.Equal(b.Len(), 0)
	b.Free()
	var nilBuf *Buf
	is.Equal(nilBuf.Len(), 0)
	nilBuf.Free()
}

// TestDegradesOnce checks that a failing mlock logs one warning, marks the
// allocator degraded and still hands out working buffers, concurrently.
func TestDegradesOnce(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var logBuf syncBuf
	a := New(slog.New(slog.NewJSONHandler(&logBuf, nil)))
	a.lock = func([]byte) error { return errors.New("cannot allocate memory") }
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := bytes.Repeat([]byte{byte('a' + i%26)}, 100)
			b, err := a.Copy(v)
			if err != nil || !bytes.Equal(b.Bytes(), v) {
				t.Errorf("copy %d failed: %v", i, err)
			}
			b.Free()
		}()
	}
	wg.Wait()
	is.True(a.Degraded())
	is.Equal(a.Locked(), int64(0))
	is.Equal(strings.Count(logBuf.String(), "secmem.mlock_unavailable"), 1)
}

func TestLockedWhenAllowed(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := New(slog.New(slog.DiscardHandler))
	b, err := a.Copy([]byte("value"))
	is.NoErr(err)
	defer b.Free()
	if a.Degraded() {
		t.Skip("mlock not allowed here (RLIMIT_MEMLOCK)")
	}
	is.Equal(a.Locked(), int64(1))
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
