module hostkit.dev/cmd/supervisord

go 1.26.0

require hostkit.dev/lib v0.0.0

require (
	github.com/creack/pty v1.1.24 // indirect
	github.com/matryer/is v1.4.1 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	gopkg.in/natefinch/lumberjack.v2 v2.2.1 // indirect
)

replace hostkit.dev/lib => ../../lib
