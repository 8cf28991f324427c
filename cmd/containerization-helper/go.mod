module hostkit.dev/cmd/containerization-helper

go 1.26.0

require (
	github.com/matryer/is v1.4.1
	github.com/moby/sys/mountinfo v0.7.2
	github.com/opencontainers/go-digest v1.0.0
	github.com/opencontainers/image-spec v1.1.1
	github.com/opencontainers/runtime-spec v1.3.0
	github.com/vmihailenco/msgpack/v5 v5.4.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
	hostkit.dev/lib v0.0.0
)

require (
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/oklog/run v1.2.0 // indirect
	github.com/peterbourgon/ff/v3 v3.4.0 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
)

replace hostkit.dev/lib => ../../lib
