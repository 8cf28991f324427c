package loopowner

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/matryer/is"
	"golang.org/x/sys/unix"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// uids returns the owners of port's listeners as sock_diag reports them.
func uids(t testing.TB, port uint16) []uint32 {
	t.Helper()
	ls, err := netlinkListeners(port)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint32
	for _, l := range ls {
		if l.Addr.Port() != port {
			t.Fatalf("sock_diag returned a listener on another port: %v", l.Addr)
		}
		out = append(out, l.UID)
	}
	return out
}

func TestNetlinkAgentOwner(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	port := uint16(egresstest.AgentListener(t, 61200)) // a child under uid 61200
	is.Equal(uids(t, port), []uint32{61200})
	_, err := Checker{}.Check(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port))
	is.Equal(wire.CodeOf(err), egressdapi.CodeLoopbackOwnerAgent)
}

func TestNetlinkOwnOwner(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	defer l.Close()
	addr := netip.MustParseAddrPort(l.Addr().String())
	me := uint32(os.Geteuid()) // 0 when the tests run as root
	is.Equal(uids(t, addr.Port()), []uint32{me})
	owners, err := Checker{AgentMin: 61184, AgentMax: 65519}.Check(addr)
	if me >= 61184 && me <= 65519 {
		is.Equal(wire.CodeOf(err), egressdapi.CodeLoopbackOwnerAgent)
		return
	}
	is.NoErr(err)
	is.Equal(owners, []uint32{me})

	// The same listeners as /proc shows (the fallback's source).
	pl, err := Checker{}.procListeners()
	is.NoErr(err)
	var fromProc []uint32
	for _, p := range pl {
		if p.Addr.Port() == addr.Port() {
			fromProc = append(fromProc, p.UID)
		}
	}
	is.Equal(fromProc, []uint32{me})

	// No listener: a port bound without listen(2) holds its number, so
	// no other process (tests run beside this one) can start listening
	// on it meanwhile, and no LISTEN socket is there to be found.
	bare := boundPort(t)
	is.Equal(len(uids(t, bare.Port())), 0)
	_, err = Checker{}.Check(bare)
	is.Equal(wire.CodeOf(err), egressdapi.CodeLoopbackOwnerUnknown)
}

// boundPort binds a TCP socket to a free port of 127.0.0.1 without
// listening on it, for the test's life, and returns its address.
func boundPort(t *testing.T) netip.AddrPort {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(sa.(*unix.SockaddrInet4).Port))
}

func TestNetlinkDualStack(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, err := net.Listen("tcp", "[::]:0") // dual-stack where IPv6 exists
	if err != nil {
		t.Skip("no IPv6:", err)
	}
	defer l.Close()
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	owners, err := Checker{}.Check(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port))
	is.NoErr(err)
	is.Equal(owners, []uint32{uint32(os.Geteuid())})
}

func TestReplyError(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	errno := func(n int32) []byte {
		return binary.NativeEndian.AppendUint32(nil, uint32(n))
	}
	is.True(errors.Is(replyError(errno(-2)), errNetlinkUnavailable))   // ENOENT: no tcp_diag
	is.True(!errors.Is(replyError(errno(-13)), errNetlinkUnavailable)) // EACCES: refused, no fallback
	is.True(replyError(errno(0)) != nil)
	is.True(replyError(nil) != nil)
}

// timeWaits leaves about n loopback sockets in TIME_WAIT (the client side
// closes first), at most 64 connections at a time.
func timeWaits(b *testing.B, n int) {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { buf := make([]byte, 1); c.Read(buf); c.Close() }()
		}
	}()
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := net.Dial("tcp", l.Addr().String())
			if err == nil {
				c.Close()
			}
		})
	}
	wg.Wait()
}

// BenchmarkOwner looks up a root-owned loopback listener's owner with
// 4,000 extra TIME_WAIT sockets in the table: sock_diag stays flat, the
// /proc fallback grows with the table.
func BenchmarkOwner(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	addr := netip.MustParseAddrPort(l.Addr().String())
	timeWaits(b, 4000)
	b.Run("netlink", func(b *testing.B) {
		for b.Loop() {
			if _, err := (Checker{}).Check(addr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proc", func(b *testing.B) {
		for b.Loop() {
			ls, err := Checker{}.procListeners()
			if err == nil {
				_, err = Checker{}.decide(addr, ls)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
