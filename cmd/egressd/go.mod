module hostkit.dev/cmd/egressd

go 1.26.0

require hostkit.dev/lib v0.0.0

require (
	github.com/matryer/is v1.4.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/net v0.62.0 // indirect
)

replace hostkit.dev/lib => ../../lib
