//go:build linux && !race

package main

// uploadSize is TestUploadStreamsLargeBody's largest body: 256 MiB, the
// whole default -buffer-budget and eight times -max-request-body.
const uploadSize = 256 << 20
