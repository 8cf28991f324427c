package loopowner

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

const table4 = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  61200        0 1 1
   1: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 0100007F:0051 0100007F:9999 01 00000000:00000000 00:00000000 00000000  61200        0 3 1
`

const table6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4 1
`

func TestParse(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ls, err := parse(strings.NewReader(table4))
	is.NoErr(err)
	is.Equal(len(ls), 2) // the ESTABLISHED socket is skipped
	is.Equal(ls[0], Listener{Addr: netip.MustParseAddrPort("127.0.0.1:8080"), UID: 61200})
	is.Equal(ls[1].Addr, netip.MustParseAddrPort("0.0.0.0:80"))
	ls, err = parse(strings.NewReader(table6))
	is.NoErr(err)
	is.Equal(ls[0], Listener{Addr: netip.MustParseAddrPort("[::1]:8081"), UID: 1000})
}

func TestDecide(t *testing.T) {
	t.Parallel()
	ls := []Listener{
		{netip.MustParseAddrPort("127.0.0.1:8080"), 61200},
		{netip.MustParseAddrPort("0.0.0.0:80"), 0},
		{netip.MustParseAddrPort("[::]:81"), 65519},
		{netip.MustParseAddrPort("[::1]:82"), 1000},
		{netip.MustParseAddrPort("127.0.0.2:83"), 61184},
	}
	for _, tc := range []struct {
		addr, code string
	}{
		{"127.0.0.1:8080", egressdapi.CodeLoopbackOwnerAgent},
		{"127.0.0.1:80", ""},
		{"127.0.0.1:81", egressdapi.CodeLoopbackOwnerAgent}, // dual-stack wildcard
		{"[::1]:82", ""},
		{"127.0.0.1:83", egressdapi.CodeLoopbackOwnerUnknown}, // bound elsewhere
		{"127.0.0.2:83", egressdapi.CodeLoopbackOwnerAgent},
		{"127.0.0.1:9", egressdapi.CodeLoopbackOwnerUnknown},
	} {
		_, err := Checker{}.decide(netip.MustParseAddrPort(tc.addr), ls)
		is.New(t).Equal(wire.CodeOf(err), tc.code) // tc.addr
	}
	_, err := Checker{AgentMin: 1000, AgentMax: 1000}.decide(netip.MustParseAddrPort("[::1]:82"), ls)
	is.New(t).Equal(wire.CodeOf(err), egressdapi.CodeLoopbackOwnerAgent)
}

func TestCheckRealListeners(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	port := egresstest.AgentListener(t, 61200)
	_, err := Checker{}.Check(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)))
	is.Equal(wire.CodeOf(err), egressdapi.CodeLoopbackOwnerAgent)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	defer l.Close()
	own := netip.MustParseAddrPort(l.Addr().String())
	owners, err := Checker{}.Check(own)
	is.NoErr(err)
	is.True(len(owners) > 0)
	l.Close()
	_, err = Checker{}.Check(own)
	is.Equal(wire.CodeOf(err), egressdapi.CodeLoopbackOwnerUnknown)
}
