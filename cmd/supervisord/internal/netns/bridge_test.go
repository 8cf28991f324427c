package netns

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestBridgeJoinsTCPToUnix: bytes cross both ways, a half-close is passed
// on, and the bridge ends (closing its connections) with its context.
func TestBridgeJoinsTCPToUnix(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir, err := os.MkdirTemp("/tmp", "nsb")
	is.NoErr(err)
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "proxy.sock")
	ul, err := net.Listen("unix", sock)
	is.NoErr(err)
	defer ul.Close()
	go func() {
		for {
			c, err := ul.Accept()
			if err != nil {
				return
			}
			go func() { // echo until EOF, then say bye and close
				defer c.Close()
				io.Copy(c, c)
				io.WriteString(c, "bye")
			}()
		}
	}()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Bridge(ctx, tl, sock, slog.New(slog.DiscardHandler)) }()

	c, err := net.Dial("tcp", tl.Addr().String())
	is.NoErr(err)
	_, err = io.WriteString(c, "hello\n")
	is.NoErr(err)
	line, err := bufio.NewReader(c).ReadString('\n')
	is.NoErr(err)
	is.Equal(line, "hello\n")
	is.NoErr(c.(*net.TCPConn).CloseWrite())
	rest, err := io.ReadAll(c)
	is.NoErr(err)
	is.Equal(string(rest), "bye") // the half-close reached the far side
	c.Close()

	held, err := net.Dial("tcp", tl.Addr().String())
	is.NoErr(err)
	io.WriteString(held, "x")
	b := make([]byte, 1)
	_, err = io.ReadFull(held, b)
	is.NoErr(err)
	cancel()
	select {
	case err := <-done:
		is.NoErr(err)
	case <-time.After(5 * time.Second):
		t.Fatal("bridge did not end with its context")
	}
	held.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = held.Read(b)
	is.True(err != nil) // closed by the bridge
	held.Close()

	// A proxy socket nobody serves: TestBridgeAnswersUnavailable.
}
