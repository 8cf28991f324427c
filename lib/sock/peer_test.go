package sock

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

func TestPeerSameProcess(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	path := sockPath(t)
	l, err := Listen(ctx, Config{Path: path, Group: -1})
	is.NoErr(err)
	defer l.Close()
	c, err := Dial(ctx, path)
	is.NoErr(err)
	defer c.Close()

	nc, err := l.Accept()
	is.NoErr(err)
	sc, ok := nc.(*Conn)
	is.True(ok) // Accept returns *Conn
	defer sc.Close()
	is.Equal(sc.Peer, Peer{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), PID: int32(os.Getpid())})

	p, err := PeerOf(c, false) // the client sees the server: us as well
	is.NoErr(err)
	is.Equal(p.PID, int32(os.Getpid()))
}

func TestCheckPeer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		peer          Peer
		allowOverflow bool
		code          string
	}{
		{name: "ordinary", peer: Peer{UID: 1000, GID: 1000, PID: 42}},
		{name: "root", peer: Peer{PID: 1}},
		{name: "pid zero", peer: Peer{UID: 1000, PID: 0}, code: CodePeerUnknown},
		{name: "negative pid", peer: Peer{UID: 1000, PID: -1}, code: CodePeerUnknown},
		{name: "overflow uid", peer: Peer{UID: OverflowUID, PID: 42}, code: CodePeerUnknown},
		{name: "overflow uid allowed", peer: Peer{UID: OverflowUID, PID: 42}, allowOverflow: true},
		{name: "pid zero even if overflow allowed", peer: Peer{UID: OverflowUID}, allowOverflow: true, code: CodePeerUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(wire.CodeOf(checkPeer(tc.peer, tc.allowOverflow)), tc.code)
		})
	}
}

// TestPeerOtherUID has children running as other users dial the socket and
// checks what the server sees, including the overflow uid policy.
func TestPeerOtherUID(t *testing.T) {
	t.Parallel()
	root := tmpRoot(t)
	bin := publicBinary(t, root)
	tests := []struct {
		name    string
		uid     uint32
		allow   bool
		reject  bool
		wantGID uint32
	}{
		{name: "another user", uid: otherID, wantGID: otherID},
		{name: "overflow uid rejected", uid: OverflowUID, reject: true},
		{name: "overflow uid allowed", uid: OverflowUID, allow: true, wantGID: OverflowUID},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			path := filepath.Join(root, string(rune('a'+i)), SocketName)
			rejected := make(chan error, 1)
			l, err := Listen(context.Background(), Config{
				Path: path, Group: -1, AllowOverflowUID: tc.allow,
				OnReject: func(err error) { rejected <- err },
			})
			is.NoErr(err)
			defer l.Close()
			// Open the way for the other user (the test's job, not sock's).
			is.NoErr(os.Chmod(filepath.Dir(path), 0o755))
			is.NoErr(os.Chmod(path, 0o666))

			cmd := helper(bin, "dial", helperPathEnv+"="+path)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tc.uid, Gid: tc.uid}}
			is.NoErr(cmd.Start())
			defer func() { is.NoErr(cmd.Wait()) }() // the child exits 0 once we hang up

			type result struct {
				c   *Conn
				err error
			}
			got := make(chan result, 1)
			go func() {
				c, err := l.AcceptConn()
				got <- result{c, err}
			}()
			if tc.reject {
				select {
				case err := <-rejected:
					is.Equal(wire.CodeOf(err), CodePeerUnknown)
				case <-time.After(20 * time.Second):
					t.Fatal("no rejection")
				}
				is.NoErr(l.Close())
				r := <-got
				is.True(r.c == nil)
				is.True(errors.Is(r.err, net.ErrClosed))
				return
			}
			r := <-got
			is.NoErr(r.err)
			defer r.c.Close()
			is.Equal(r.c.Peer, Peer{UID: tc.uid, GID: tc.wantGID, PID: int32(cmd.Process.Pid)})
			b := make([]byte, 1)
			_, err = r.c.Read(b)
			is.NoErr(err)
			is.Equal(string(b), "x")
		})
	}
}

func TestFromListener(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	path := filepath.Join(tmpRoot(t), "p.sock")
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	is.NoErr(err)
	l := FromListener(ul, Config{})
	c, err := Dial(context.Background(), path)
	is.NoErr(err)
	defer c.Close()
	sc, err := l.AcceptConn()
	is.NoErr(err)
	is.Equal(sc.Peer.PID, int32(os.Getpid()))
	is.NoErr(sc.Close())
	is.NoErr(l.Close())
	_, err = os.Lstat(path)
	is.NoErr(err) // not ours to remove
}

func BenchmarkPeerOf(b *testing.B) {
	path := filepath.Join(tmpRoot(b), "b.sock")
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		b.Fatal(err)
	}
	defer ul.Close()
	c, err := Dial(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	sc, err := ul.AcceptUnix()
	if err != nil {
		b.Fatal(err)
	}
	defer sc.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := PeerOf(sc, false); err != nil {
			b.Fatal(err)
		}
	}
}
