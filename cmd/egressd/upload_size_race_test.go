//go:build linux && race

package main

// uploadSize is TestUploadStreamsLargeBody's largest body under the race
// detector, which slows the scan about tenfold: 8 MiB, still eight times
// the test's -max-request-body.
const uploadSize = 8 << 20
