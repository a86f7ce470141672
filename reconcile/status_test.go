package reconcile

import (
	"slices"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestPodIPs(t *testing.T) {
	sandbox := func(mode runtimeapi.NamespaceMode, ip string, more ...string) *runtimeapi.PodSandboxStatus {
		s := &runtimeapi.PodSandboxStatus{
			Network: &runtimeapi.PodSandboxNetworkStatus{Ip: ip},
			Linux:   &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{Network: mode}}},
		}
		for _, m := range more {
			s.Network.AdditionalIps = append(s.Network.AdditionalIps, &runtimeapi.PodIP{Ip: m})
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		sandbox *runtimeapi.PodSandboxStatus
		nodeIP  string
		want    []string
	}{
		{"pod network", sandbox(runtimeapi.NamespaceMode_POD, "10.88.0.2", "fd00::2"), "192.0.2.2", []string{"10.88.0.2", "fd00::2"}},
		{"pod network without an address yet", sandbox(runtimeapi.NamespaceMode_POD, ""), "192.0.2.2", nil},
		{"host network: the node's", sandbox(runtimeapi.NamespaceMode_NODE, ""), "192.0.2.2", []string{"192.0.2.2"}},
		{"host network, node address unknown", sandbox(runtimeapi.NamespaceMode_NODE, ""), "", nil},
		{"host network the runtime gives an address", sandbox(runtimeapi.NamespaceMode_NODE, "127.0.0.1"), "192.0.2.2", []string{"127.0.0.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podIPs(tc.sandbox, tc.nodeIP); !slices.Equal(got, tc.want) {
				t.Fatalf("podIPs = %v, want %v", got, tc.want)
			}
		})
	}
}
