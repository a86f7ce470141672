package podcgroups

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodCgroupNames(t *testing.T) {
	const uid = "5c2d7a1e-0b6f-4f7e-9a53-2f1c8e6d4b10"
	const escaped = "5c2d7a1e_0b6f_4f7e_9a53_2f1c8e6d4b10"
	for _, tc := range []struct {
		qos                    corev1.PodQOSClass
		cgroupfs, unit, slices string
	}{
		{corev1.PodQOSGuaranteed, "/kubepods/pod" + uid, "kubepods-pod" + escaped + ".slice",
			"/kubepods.slice/kubepods-pod" + escaped + ".slice"},
		{corev1.PodQOSBurstable, "/kubepods/burstable/pod" + uid, "kubepods-burstable-pod" + escaped + ".slice",
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + escaped + ".slice"},
		{corev1.PodQOSBestEffort, "/kubepods/besteffort/pod" + uid, "kubepods-besteffort-pod" + escaped + ".slice",
			"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + escaped + ".slice"},
	} {
		t.Run(string(tc.qos), func(t *testing.T) {
			n := podName(tc.qos, uid)
			if got := n.Cgroupfs(); got != tc.cgroupfs {
				t.Errorf("Cgroupfs = %s, want %s", got, tc.cgroupfs)
			}
			if got := n.Unit(); got != tc.unit {
				t.Errorf("Unit = %s, want %s", got, tc.unit)
			}
			if got := n.Systemd(); got != tc.slices {
				t.Errorf("Systemd = %s, want %s", got, tc.slices)
			}
			back, ok := unitName(n.Unit())
			if !ok || !slices.Equal(back, n) {
				t.Errorf("unitName(%s) = %v, %v; want %v", n.Unit(), back, ok, n)
			}
			if got, ok := back.podUID(); !ok || got != uid {
				t.Errorf("podUID = %q, %v; want %s", got, ok, uid)
			}
		})
	}
	if got := kubepods.Parent().Unit(); got != "-.slice" {
		t.Errorf("kubepods' parent = %s, want -.slice", got)
	}
	if got := burstable.Unit(); got != "kubepods-burstable.slice" {
		t.Errorf("burstable = %s", got)
	}
}

func TestPodUIDOfOtherCgroups(t *testing.T) {
	for _, n := range []Name{kubepods, burstable, besteffort, {"kubepods", "other", "pod1"}, {"system", "pod1"}, {"kubepods", "burstable", "pod1", "c"}} {
		if uid, ok := n.podUID(); ok {
			t.Errorf("%v: pod %q, want none", n, uid)
		}
	}
	for _, u := range []string{"a.service", "-.slice", ".slice", "kubepods.scope"} {
		if n, ok := unitName(u); ok {
			if _, pod := n.podUID(); pod {
				t.Errorf("%s read as a pod's slice %v", u, n)
			}
		}
	}
}

func TestCheckUID(t *testing.T) {
	for _, tc := range []struct {
		d       Driver
		uid     string
		refused string
	}{
		{Systemd, "5c2d7a1e-0b6f", ""},
		{Cgroupfs, "a_b", ""},
		{Systemd, "a_b", "systemd cgroup driver"},
		{Cgroupfs, "", "no uid"},
		{Cgroupfs, "../x", "not a cgroup name"},
	} {
		err := checkUID(tc.d, tc.uid)
		if tc.refused == "" && err != nil || tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)) {
			t.Errorf("%s %q: %v, want %q", tc.d, tc.uid, err, tc.refused)
		}
	}
}
