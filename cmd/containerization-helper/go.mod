module hostkit.dev/cmd/containerization-helper

go 1.26.0

require hostkit.dev/lib v0.0.0

replace hostkit.dev/lib => ../../lib
