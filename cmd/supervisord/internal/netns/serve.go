package netns

import (
	"context"
	"errors"
	"net"
	"sync"
)

// serveConns accepts on l, handling each connection on its own goroutine,
// at most MaxConns at once, until ctx ends or l fails; then it closes l
// and every tracked connection and waits for the handlers. handle may
// track further connections (closed the same way) with track, which
// returns the untrack.
func serveConns(ctx context.Context, l net.Listener, handle func(c net.Conn, track func(net.Conn) func())) error {
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) func() {
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		return func() {
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
		}
	}
	closeAll := func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			c.Close()
		}
	}
	stop := context.AfterFunc(ctx, closeAll)
	defer stop()
	sem := make(chan struct{}, MaxConns)
	var err error
	for {
		sem <- struct{}{}
		var c net.Conn
		if c, err = l.Accept(); err != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			defer track(c)()
			handle(c, track)
		})
	}
	stop()
	closeAll()
	wg.Wait()
	if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
