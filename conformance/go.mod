module hostkit.dev/conformance

go 1.26.0

require (
	github.com/matryer/is v1.4.1
	github.com/moby/sys/mountinfo v0.7.2
)

require (
	github.com/blang/semver v3.5.1+incompatible // indirect
	github.com/cpuguy83/go-md2man/v2 v2.0.7 // indirect
	github.com/hashicorp/errwrap v1.0.0 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/mndrix/tap-go v0.0.0-20171203230836-629fa407e90b // indirect
	github.com/mrunalp/fileutils v0.5.1 // indirect
	github.com/opencontainers/runtime-spec v1.0.2 // indirect
	github.com/opencontainers/runtime-tools v0.9.0 // indirect
	github.com/opencontainers/selinux v1.11.1 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/satori/go.uuid v1.1.0 // indirect
	github.com/sirupsen/logrus v1.10.2 // indirect
	github.com/syndtr/gocapability v0.0.0-20200815063812-42c35b437635 // indirect
	github.com/urfave/cli v1.22.17 // indirect
	github.com/xeipuuv/gojsonpointer v0.0.0-20180127040702-4e3ac2762d5f // indirect
	github.com/xeipuuv/gojsonreference v0.0.0-20180127040603-bd5ef7bd5415 // indirect
	github.com/xeipuuv/gojsonschema v1.2.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
)

tool (
	github.com/opencontainers/runtime-tools/cmd/runtimetest
	github.com/opencontainers/runtime-tools/validation/config_updates_without_affect
	github.com/opencontainers/runtime-tools/validation/create
	github.com/opencontainers/runtime-tools/validation/default
	github.com/opencontainers/runtime-tools/validation/delete
	github.com/opencontainers/runtime-tools/validation/delete_only_create_resources
	github.com/opencontainers/runtime-tools/validation/delete_resources
	github.com/opencontainers/runtime-tools/validation/hooks
	github.com/opencontainers/runtime-tools/validation/hooks_stdin
	github.com/opencontainers/runtime-tools/validation/hostname
	github.com/opencontainers/runtime-tools/validation/kill
	github.com/opencontainers/runtime-tools/validation/kill_no_effect
	github.com/opencontainers/runtime-tools/validation/killsig
	github.com/opencontainers/runtime-tools/validation/linux_cgroups_blkio
	github.com/opencontainers/runtime-tools/validation/linux_cgroups_cpus
	github.com/opencontainers/runtime-tools/validation/linux_cgroups_devices
	github.com/opencontainers/runtime-tools/validation/linux_cgroups_hugetlb
	github.com/opencontainers/runtime-tools/validation/linux_cgroups_memory
	github.com/opencontainers/runtime-tools/validation/linux_cgroups_network
	github.com/opencontainers/runtime-tools/validation/linux_cgroups_pids
	github.com/opencontainers/runtime-tools/validation/linux_cgroups_relative_blkio
	github.com/opencontainers/runtime-tools/validation/linux_cgroups_relative_cpus
	github.com/opencontainers/runtime-tools/validation/linux_cgroups_relative_devices
	github.com/opencontainers/runtime-tools/validation/linux_cgroups_relative_hugetlb
	github.com/opencontainers/runtime-tools/validation/linux_cgroups_relative_memory
	github.com/opencontainers/runtime-tools/validation/linux_cgroups_relative_network
	github.com/opencontainers/runtime-tools/validation/linux_cgroups_relative_pids
	github.com/opencontainers/runtime-tools/validation/linux_devices
	github.com/opencontainers/runtime-tools/validation/linux_masked_paths
	github.com/opencontainers/runtime-tools/validation/linux_mount_label
	github.com/opencontainers/runtime-tools/validation/linux_ns_itype
	github.com/opencontainers/runtime-tools/validation/linux_ns_nopath
	github.com/opencontainers/runtime-tools/validation/linux_ns_path
	github.com/opencontainers/runtime-tools/validation/linux_ns_path_type
	github.com/opencontainers/runtime-tools/validation/linux_process_apparmor_profile
	github.com/opencontainers/runtime-tools/validation/linux_readonly_paths
	github.com/opencontainers/runtime-tools/validation/linux_rootfs_propagation
	github.com/opencontainers/runtime-tools/validation/linux_seccomp
	github.com/opencontainers/runtime-tools/validation/linux_sysctl
	github.com/opencontainers/runtime-tools/validation/linux_uid_mappings
	github.com/opencontainers/runtime-tools/validation/misc_props
	github.com/opencontainers/runtime-tools/validation/mounts
	github.com/opencontainers/runtime-tools/validation/pidfile
	github.com/opencontainers/runtime-tools/validation/poststart
	github.com/opencontainers/runtime-tools/validation/poststart_fail
	github.com/opencontainers/runtime-tools/validation/poststop
	github.com/opencontainers/runtime-tools/validation/poststop_fail
	github.com/opencontainers/runtime-tools/validation/prestart
	github.com/opencontainers/runtime-tools/validation/prestart_fail
	github.com/opencontainers/runtime-tools/validation/process
	github.com/opencontainers/runtime-tools/validation/process_capabilities
	github.com/opencontainers/runtime-tools/validation/process_capabilities_fail
	github.com/opencontainers/runtime-tools/validation/process_oom_score_adj
	github.com/opencontainers/runtime-tools/validation/process_rlimits
	github.com/opencontainers/runtime-tools/validation/process_rlimits_fail
	github.com/opencontainers/runtime-tools/validation/process_user
	github.com/opencontainers/runtime-tools/validation/root_readonly_true
	github.com/opencontainers/runtime-tools/validation/start
	github.com/opencontainers/runtime-tools/validation/state
)
