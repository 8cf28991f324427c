//go:build !linux

// Command helper-bench runs on Linux only: runc, umoci and the helper do.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "helper-bench: Linux only")
	os.Exit(1)
}
