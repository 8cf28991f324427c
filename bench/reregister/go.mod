module hostkit.dev/bench/reregister

go 1.26.0

require hostkit.dev/lib v0.0.0

require (
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace hostkit.dev/lib => ../../lib
