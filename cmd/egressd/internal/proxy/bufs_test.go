package proxy

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestBufConnBatch: writes to a held bufConn reach the socket as one
// write when it is released, byte for byte; writes to one that is not
// held reach it one by one; a release whose write fails says so. The
// socket is net.Pipe, whose reads return at most one write.
func TestBufConnBatch(t *testing.T) {
	t.Parallel()
	parts := [][]byte{[]byte("8000\r\n"), bytes.Repeat([]byte("a"), 16<<10), bytes.Repeat([]byte("b"), 16<<10), []byte("\r\n")}
	all := bytes.Join(parts, nil)
	tests := []struct {
		name  string
		hold  bool
		reads int // reads of len(all) bytes that get everything
	}{
		{"held", true, 1},
		{"not held", false, len(parts)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			bc := &bufConn{Conn: a, pool: &bufPools{}}
			got := make(chan [][]byte, 1)
			go func() {
				var reads [][]byte
				buf := make([]byte, len(all))
				for n := 0; n < len(all); {
					k, err := b.Read(buf)
					if err != nil {
						break
					}
					reads = append(reads, bytes.Clone(buf[:k]))
					n += k
				}
				got <- reads
			}()
			if tt.hold {
				bc.hold()
			}
			for _, p := range parts {
				n, err := bc.Write(p)
				is.NoErr(err)
				is.Equal(n, len(p))
			}
			is.NoErr(bc.release()) // a no-op when not held
			reads := <-got
			is.Equal(len(reads), tt.reads)
			is.Equal(bytes.Join(reads, nil), all)
		})
	}
	t.Run("failed release", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		a, b := net.Pipe()
		b.Close()
		bc := &bufConn{Conn: a, pool: &bufPools{}}
		bc.hold()
		_, err := bc.Write(all) // held: the failure comes with release
		is.NoErr(err)
		is.True(bc.release() != nil)
		_, err = bc.Write(all)
		is.True(err != nil)
	})
}

// TestBufConnCloseWhileHeld: the TLS layer may write an alert from
// another goroutine (Close) while a piece is held; the race detector
// watches the batch.
func TestBufConnCloseWhileHeld(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a, b := net.Pipe()
	defer b.Close()
	go io.Copy(io.Discard, b)
	bc := &bufConn{Conn: a, pool: &bufPools{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			bc.Write([]byte("alert"))
		}
	}()
	for range 100 {
		bc.hold()
		bc.Write([]byte("piece"))
		_ = bc.release()
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("writes did not finish")
	}
	is.NoErr(a.Close())
}
