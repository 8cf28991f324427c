module hostkit.dev/cmd/egressd

go 1.26.0

require hostkit.dev/lib v0.0.0

replace hostkit.dev/lib => ../../lib
