package rpc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestReqCtxBehavesLikeWithDeadline(t *testing.T) {
	t.Parallel()
	t.Run("deadline and value", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		d := time.Now().Add(time.Hour)
		c := newReqCtx(WithCorr(context.Background(), "c-1"), d)
		got, ok := c.Deadline()
		is.True(ok)
		is.Equal(got, d)
		is.Equal(CorrFrom(c), "c-1")
		is.NoErr(c.Err())
		c.stop()
		is.True(errors.Is(c.Err(), context.Canceled))
		<-c.Done() // made after stop: already closed
	})
	t.Run("expires without Done", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		c := newReqCtx(context.Background(), time.Now().Add(20*time.Millisecond))
		is.NoErr(c.Err())
		time.Sleep(30 * time.Millisecond)
		is.True(errors.Is(c.Err(), context.DeadlineExceeded))
		is.True(errors.Is(context.Cause(c), context.DeadlineExceeded))
		c.stop()
		is.True(errors.Is(c.Err(), context.DeadlineExceeded))
	})
	t.Run("Done fires at the deadline", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		c := newReqCtx(context.Background(), time.Now().Add(20*time.Millisecond))
		defer c.stop()
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done did not fire")
		}
		is.True(errors.Is(c.Err(), context.DeadlineExceeded))
	})
	t.Run("parent cancel", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		p, cancel := context.WithCancel(context.Background())
		c := newReqCtx(p, time.Now().Add(time.Hour))
		defer c.stop()
		cancel()
		is.True(errors.Is(c.Err(), context.Canceled))
		<-c.Done()
	})
	t.Run("earlier parent deadline", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		pd := time.Now().Add(time.Minute)
		p, cancel := context.WithDeadline(context.Background(), pd)
		defer cancel()
		c := newReqCtx(p, time.Now().Add(time.Hour))
		got, _ := c.Deadline()
		is.Equal(got, pd)
	})
}
