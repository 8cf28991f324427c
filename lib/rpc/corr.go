package rpc

import "context"

type corrKey struct{}

// WithCorr returns ctx carrying the correlation id corr; Client.Call sends
// it on every request made with that context, so one id follows a request
// across daemons (docs/protocol.md, "Request envelope").
func WithCorr(ctx context.Context, corr string) context.Context {
	if corr == "" {
		return ctx
	}
	return context.WithValue(ctx, corrKey{}, corr)
}

// CorrFrom returns the correlation id carried by ctx, or "".
func CorrFrom(ctx context.Context) string {
	s, _ := ctx.Value(corrKey{}).(string)
	return s
}
