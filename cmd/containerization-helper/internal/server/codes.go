package server

import (
	"hostkit.dev/cmd/containerization-helper/internal/image"
	"hostkit.dev/cmd/containerization-helper/internal/provider"
	"hostkit.dev/cmd/containerization-helper/internal/state"
)

// Codes of the helper's internal packages that the server itself
// returns (each listed in docs/protocol.md by its package).
const (
	CodeInvalidID  = provider.CodeInvalidID
	CodeNotFound   = provider.CodeNotFound
	CodeExists     = provider.CodeExists
	CodeBadState   = provider.CodeBadState
	CodePathUnsafe = image.CodePathUnsafe
	CodeFenceStale = state.CodeFenceStale
)
