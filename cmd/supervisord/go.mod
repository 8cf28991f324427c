module hostkit.dev/cmd/supervisord

go 1.26.0

require (
	github.com/creack/pty v1.1.24
	github.com/matryer/is v1.4.1
	golang.org/x/sys v0.50.0
	hostkit.dev/lib v0.0.0
)

require (
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/oklog/run v1.2.0 // indirect
	github.com/peterbourgon/ff/v3 v3.4.0 // indirect
	github.com/stretchr/testify v1.8.0 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace hostkit.dev/lib => ../../lib
