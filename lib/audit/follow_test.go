package audit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestFollowAcrossRotation(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	l := mustOpen(t, opts)
	appendN(t, l, 10)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan uint64, 100)
	done := make(chan error, 1)
	go func() {
		done <- Follow(ctx, opts.Dir, DefaultName, 5, func(r Record) error {
			got <- r.Seq
			return nil
		})
	}()
	for i := 0; i < 3; i++ {
		appendN(t, l, 10) // each batch rotates at least once
		time.Sleep(3 * followPoll / 2)
	}
	want := uint64(5)
	for want <= 40 {
		select {
		case s := <-got:
			is.Equal(s, want)
			want++
		case <-ctx.Done():
			t.Fatalf("waiting for seq %d: %v", want, ctx.Err())
		}
	}
	cancel()
	is.True(errors.Is(<-done, context.Canceled))
}

func TestFollowStopsOnCallbackError(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	opts := testOpts(t)
	appendN(t, mustOpen(t, opts), 3)
	stop := errors.New("stop")
	n := 0
	err := Follow(context.Background(), opts.Dir, DefaultName, 0, func(Record) error {
		n++
		return stop
	})
	is.Equal(err, stop)
	is.Equal(n, 1)
}
