package manager

import "context"

type decidedKey struct{}

// WithDecided returns ctx carrying f, which an operation calls once its
// outcome is decided as a success: nothing after that point makes it
// fail. Provision calls it as soon as the agent runs, so its audit "after"
// record can be written while the instance record's last writes finish
// (cmd/supervisord's audit wrapper; docs/supervisord.md, "Durability").
// An operation may never call it; f must be safe to call more than once.
func WithDecided(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, decidedKey{}, f)
}

// decided calls ctx's WithDecided function, if any.
func decided(ctx context.Context) {
	if f, ok := ctx.Value(decidedKey{}).(func()); ok {
		f()
	}
}
