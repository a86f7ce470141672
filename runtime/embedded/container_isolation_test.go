package embedded

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

func TestContainerIsolation(t *testing.T) {
	caps := func(set []string) shim.Capabilities {
		return shim.Capabilities{Bounding: set, Effective: set, Permitted: set}
	}
	without := func(set []string, drop ...string) []string {
		return slices.DeleteFunc(slices.Clone(set), func(c string) bool { return slices.Contains(drop, c) })
	}
	// Each row edits a base config and the base result: root, containerd's
	// defaults, the pod's /dev/shm.
	for _, tc := range []struct {
		name    string
		files   []string // created in the sandbox dir
		config  func(*runtimeapi.ContainerConfig, *runtimeapi.PodSandboxConfig)
		want    func(iso *shim.Isolation, usr *shim.User, sandboxDir string)
		wantErr string
	}{
		{name: "defaults"},
		{
			name: "add and drop, with or without CAP_",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.Capabilities = &runtimeapi.Capability{
					AddCapabilities: []string{"SYS_ADMIN", "cap_net_admin"}, DropCapabilities: []string{"CHOWN", "CAP_KILL"},
				}
			},
			want: func(iso *shim.Isolation, _ *shim.User, _ string) {
				iso.Capabilities = caps(append(without(shim.DefaultCapabilities(), "CAP_CHOWN", "CAP_KILL"), "CAP_SYS_ADMIN", "CAP_NET_ADMIN"))
			},
		},
		{
			name: "drop ALL",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.Capabilities = &runtimeapi.Capability{DropCapabilities: []string{"ALL"}}
			},
			want: func(iso *shim.Isolation, _ *shim.User, _ string) { iso.Capabilities = caps(nil) },
		},
		{
			name: "drop ALL, add one",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.Capabilities = &runtimeapi.Capability{
					DropCapabilities: []string{"all"}, AddCapabilities: []string{"NET_BIND_SERVICE"},
				}
			},
			want: func(iso *shim.Isolation, _ *shim.User, _ string) {
				iso.Capabilities = caps([]string{"CAP_NET_BIND_SERVICE"})
			},
		},
		{
			name: "add ALL, drop one",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.Capabilities = &runtimeapi.Capability{
					AddCapabilities: []string{"ALL"}, DropCapabilities: []string{"CHOWN"},
				}
			},
			want: func(iso *shim.Isolation, _ *shim.User, _ string) {
				iso.Capabilities = caps(without(shim.AllCapabilities(), "CAP_CHOWN"))
			},
		},
		{
			name: "ambient",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.Capabilities = &runtimeapi.Capability{AddAmbientCapabilities: []string{"NET_ADMIN"}}
			},
			want: func(iso *shim.Isolation, _ *shim.User, _ string) {
				iso.Capabilities = caps(append(shim.DefaultCapabilities(), "CAP_NET_ADMIN"))
				iso.Capabilities.Inheritable = []string{"CAP_NET_ADMIN"}
				iso.Capabilities.Ambient = []string{"CAP_NET_ADMIN"}
			},
		},
		{
			name: "unknown capability",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.Capabilities = &runtimeapi.Capability{AddCapabilities: []string{"FLY"}}
			},
			wantErr: `unknown capability "FLY"`,
		},
		{
			name: "privileged",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.Privileged = true
				c.Linux.SecurityContext.Capabilities = &runtimeapi.Capability{DropCapabilities: []string{"ALL"}}
				c.Linux.SecurityContext.MaskedPaths = []string{"/proc/kcore"}
			},
			want: func(iso *shim.Isolation, _ *shim.User, _ string) {
				iso.Capabilities = caps(shim.AllCapabilities())
				iso.MaskedPaths, iso.ReadonlyPaths = nil, nil
				iso.WritableSysfs, iso.DeviceNodes = true, true
			},
		},
		{
			name: "masked and read-only paths given",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.MaskedPaths = []string{"/proc/a"}
				c.Linux.SecurityContext.ReadonlyPaths = []string{"/proc/b"}
			},
			want: func(iso *shim.Isolation, _ *shim.User, _ string) {
				iso.MaskedPaths, iso.ReadonlyPaths = []string{"/proc/a"}, []string{"/proc/b"}
			},
		},
		{
			name: "no_new_privs and read-only root",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.NoNewPrivs = true
				c.Linux.SecurityContext.ReadonlyRootfs = true
			},
			want: func(iso *shim.Isolation, _ *shim.User, _ string) { iso.NoNewPrivs, iso.ReadonlyRootfs = true, true },
		},
		{
			name: "run_as_group without a user is refused",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.RunAsGroup = &runtimeapi.Int64Value{Value: 5}
			},
			wantErr: `user group "5" is specified without user`,
		},
		{
			name: "supplemental groups without a user are kept",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.SupplementalGroups = []int64{6, 5, 0}
			},
			want: func(_ *shim.Isolation, usr *shim.User, _ string) { usr.Groups = []uint32{0, 6, 5} },
		},
		{
			name: "run_as_user in passwd: its group and groups",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.RunAsUser = &runtimeapi.Int64Value{Value: 1000}
				c.Linux.SecurityContext.SupplementalGroups = []int64{7}
			},
			want: func(_ *shim.Isolation, usr *shim.User, _ string) {
				*usr = shim.User{UID: 1000, GID: 1000, Groups: []uint32{1000, 29, 44, 7}}
			},
		},
		{
			name: "run_as_user not in passwd: group 0",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.RunAsUser = &runtimeapi.Int64Value{Value: 4242}
			},
			want: func(_ *shim.Isolation, usr *shim.User, _ string) { *usr = shim.User{UID: 4242, Groups: []uint32{0}} },
		},
		{
			name: "run_as_username and run_as_group",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.RunAsUsername = "app"
				c.Linux.SecurityContext.RunAsGroup = &runtimeapi.Int64Value{Value: 8}
			},
			want: func(_ *shim.Isolation, usr *shim.User, _ string) {
				*usr = shim.User{UID: 1000, GID: 8, Groups: []uint32{8, 29, 44}}
			},
		},
		{
			name: "strict supplemental groups policy: no groups from etc/group",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.RunAsUsername = "app"
				c.Linux.SecurityContext.SupplementalGroupsPolicy = runtimeapi.SupplementalGroupsPolicy_Strict
			},
			want: func(_ *shim.Isolation, usr *shim.User, _ string) {
				*usr = shim.User{UID: 1000, GID: 1000, Groups: []uint32{1000}}
			},
		},
		{
			name: "unknown user name",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.RunAsUsername = "nobody-here"
			},
			wantErr: `no user "nobody-here" in /etc/passwd`,
		},
		{
			name: "mounts and propagation, parents first",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Mounts = []*runtimeapi.Mount{
					{HostPath: "/h/c", ContainerPath: "/data/b/c/"},
					{HostPath: "/h/data", ContainerPath: "/data", Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
					{HostPath: "/h/x", ContainerPath: "/x", Readonly: true, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
				}
			},
			want: func(iso *shim.Isolation, _ *shim.User, dir string) {
				iso.Mounts = []shim.Mount{
					{Source: "/h/data", Destination: "/data", Propagation: "rshared"},
					{Source: "/h/x", Destination: "/x", ReadOnly: true, Propagation: "rslave"},
					{Source: filepath.Join(dir, "shm"), Destination: "/dev/shm", PodOwned: true},
					{Source: "/h/c", Destination: "/data/b/c", Propagation: "rprivate"},
				}
			},
		},
		{
			name: "relative container path",
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Mounts = []*runtimeapi.Mount{{HostPath: "/h", ContainerPath: "data"}}
			},
			wantErr: `mount container path "data" is not absolute`,
		},
		{
			name:  "the pod's resolv.conf and hostname, read-only with the root",
			files: []string{"resolv.conf", "hostname"},
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Linux.SecurityContext.ReadonlyRootfs = true
			},
			want: func(iso *shim.Isolation, _ *shim.User, dir string) {
				iso.ReadonlyRootfs = true
				iso.Mounts = append(iso.Mounts,
					shim.Mount{Source: filepath.Join(dir, "resolv.conf"), Destination: "/etc/resolv.conf", ReadOnly: true},
					shim.Mount{Source: filepath.Join(dir, "hostname"), Destination: "/etc/hostname", ReadOnly: true})
			},
		},
		{
			name:  "the CRI's own /dev/shm and resolv.conf win",
			files: []string{"resolv.conf"},
			config: func(c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) {
				c.Mounts = []*runtimeapi.Mount{
					{HostPath: "/h/shm", ContainerPath: "/dev/shm"},
					{HostPath: "/h/resolv", ContainerPath: "/etc/resolv.conf", Readonly: true},
				}
			},
			want: func(iso *shim.Isolation, _ *shim.User, _ string) {
				iso.Mounts = []shim.Mount{
					{Source: "/h/shm", Destination: "/dev/shm", Propagation: "rprivate"},
					{Source: "/h/resolv", Destination: "/etc/resolv.conf", ReadOnly: true, Propagation: "rprivate"},
				}
			},
		},
		{
			name: "hostIPC: the host's /dev/shm",
			config: func(_ *runtimeapi.ContainerConfig, sb *runtimeapi.PodSandboxConfig) {
				sb.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
					NamespaceOptions: &runtimeapi.NamespaceOption{Ipc: runtimeapi.NamespaceMode_NODE},
				}}
			},
			want: func(iso *shim.Isolation, _ *shim.User, _ string) {
				iso.Mounts = []shim.Mount{{Source: "/dev/shm", Destination: "/dev/shm"}}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sandboxDir := t.TempDir()
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(sandboxDir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg := &runtimeapi.ContainerConfig{Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{}}}
			sb := &runtimeapi.PodSandboxConfig{}
			if tc.config != nil {
				tc.config(cfg, sb)
			}
			iso, usr, _, err := containerIsolation(cfg, sb, sandboxDir, hostUsers("testdata/etc"), "", nil)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantIso := &shim.Isolation{
				Capabilities:  caps(shim.DefaultCapabilities()),
				MaskedPaths:   defaultMaskedPaths,
				ReadonlyPaths: defaultReadonlyPaths,
				Mounts:        []shim.Mount{{Source: filepath.Join(sandboxDir, "shm"), Destination: "/dev/shm", PodOwned: true}},
			}
			wantUsr := &shim.User{Groups: []uint32{0}}
			if tc.want != nil {
				tc.want(wantIso, wantUsr, sandboxDir)
			}
			if !reflect.DeepEqual(iso, wantIso) {
				t.Errorf("isolation\n got %+v\nwant %+v", iso, wantIso)
			}
			if !reflect.DeepEqual(usr, wantUsr) {
				t.Errorf("user %+v, want %+v", usr, wantUsr)
			}
		})
	}
}
