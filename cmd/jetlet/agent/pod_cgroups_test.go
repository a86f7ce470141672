package agent

import (
	"errors"
	"fmt"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/podcgroups"
	"github.com/jetlet/jetlet/runtime/crierr"
)

func TestCgroupDriverFromTheRuntimeOrTheFlag(t *testing.T) {
	linux := func(d runtimeapi.CgroupDriver) *runtimeapi.RuntimeConfigResponse {
		return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: d}}
	}
	unimplemented := fmt.Errorf("RuntimeConfig: %w", crierr.ErrUnimplemented)
	for _, tc := range []struct {
		name string
		resp *runtimeapi.RuntimeConfigResponse
		err  error
		flag string
		want podcgroups.Driver
	}{
		{"the runtime's systemd wins over the flag", linux(runtimeapi.CgroupDriver_SYSTEMD), nil, "cgroupfs", podcgroups.Systemd},
		{"the runtime's cgroupfs wins over the flag", linux(runtimeapi.CgroupDriver_CGROUPFS), nil, "systemd", podcgroups.Cgroupfs},
		{"no RuntimeConfig: the flag", nil, unimplemented, "systemd", podcgroups.Systemd},
		{"an answer without its Linux part is not SYSTEMD, the enum's zero", &runtimeapi.RuntimeConfigResponse{}, nil, "cgroupfs", podcgroups.Cgroupfs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := cgroupDriver(tc.resp, tc.err, tc.flag)
			if err != nil || got != tc.want {
				t.Errorf("driver %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, _, err := cgroupDriver(nil, errors.New("connection refused"), "cgroupfs"); err == nil {
		t.Error("a failed RuntimeConfig: no error")
	}
}
