package embedded

import (
	"os"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A container may create a device node (runc allows mknod of any) but
// open only the default devices and those its config asks for; a
// privileged one opens any. The host's RNG (c 10:183) stands for a raw disk.
func TestContainerDevices(t *testing.T) {
	h := cgroupHarness(t)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse on this host")
	}
	sb, sbCfg := h.uniquePod("devices")
	const script = `mknod /dev/hw c 10 183 && echo made; head -c 1 /dev/hw >/dev/null && echo hw opened; ` +
		`true </dev/fuse && echo fuse opened; head -c 1 /dev/urandom >/dev/null && echo urandom opened`
	for _, tc := range []struct {
		name       string
		edit       func(*runtimeapi.ContainerConfig)
		want, deny []string
	}{
		{name: "default", want: []string{"made", "urandom opened"}, deny: []string{"hw opened", "fuse opened"}},
		{
			name: "fuse asked for",
			edit: func(c *runtimeapi.ContainerConfig) {
				c.Devices = []*runtimeapi.Device{{HostPath: "/dev/fuse", ContainerPath: "/dev/fuse", Permissions: "rw"}}
			},
			want: []string{"made", "fuse opened", "urandom opened"}, deny: []string{"hw opened"},
		},
		{
			name: "privileged",
			edit: func(c *runtimeapi.ContainerConfig) {
				c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{Privileged: true}}
				c.Devices = []*runtimeapi.Device{{HostPath: "/dev/fuse", ContainerPath: "/dev/fuse"}}
			},
			want: []string{"made", "hw opened", "fuse opened", "urandom opened"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := containerConfig(strings.ReplaceAll(tc.name, " ", "-"), nil, "sh", "-c", script+"; echo end")
			if tc.edit != nil {
				tc.edit(cfg)
			}
			id := h.create(sb, sbCfg, cfg)
			h.startC(id)
			st := h.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
			log := strings.Join(h.waitLog(st.GetLogPath(), "end"), "\n")
			for _, w := range tc.want {
				if !strings.Contains(log, "stdout F "+w) {
					t.Errorf("log lacks %q:\n%s", w, log)
				}
			}
			for _, d := range tc.deny {
				if strings.Contains(log, "stdout F "+d) {
					t.Errorf("log has %q:\n%s", d, log)
				}
			}
		})
	}
}

func TestContainerDevicesRefused(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	for _, tc := range []struct {
		name    string
		device  *runtimeapi.Device
		wantErr string
	}{
		{"not a device", &runtimeapi.Device{HostPath: "/etc/hostname", ContainerPath: "/dev/x"}, "is not a device node"},
		{"missing", &runtimeapi.Device{HostPath: "/dev/no-such-device", ContainerPath: "/dev/x"}, "no such file"},
		{"bad permissions", &runtimeapi.Device{HostPath: "/dev/null", ContainerPath: "/dev/x", Permissions: "rwx"}, `permissions "rwx"`},
		{"relative path", &runtimeapi.Device{HostPath: "/dev/null", ContainerPath: "dev/x"}, "not absolute"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := containerConfig("c", nil, "true")
			cfg.Devices = []*runtimeapi.Device{tc.device}
			_, err := h.tryCreate(sb, sbCfg, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("CreateContainer error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}
