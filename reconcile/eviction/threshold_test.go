package eviction

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func quantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func TestParseThresholds(t *testing.T) {
	tests := []struct {
		name                          string
		hard, soft, grace, minReclaim string
		want                          []string // Threshold.String of each, in order
		wantErr                       string
	}{
		{name: "no values"},
		{name: "all flag values",
			hard: "memory.available<150Mi", soft: "memory.available<300Mi", grace: "memory.available=30s", minReclaim: "memory.available=0",
			want: []string{"memory.available<150Mi reclaiming 0", "memory.available<300Mi for 30s reclaiming 0"}},
		{name: "all flag values in percentages",
			hard: "memory.available<10%", soft: "memory.available<30%", grace: "memory.available=30s", minReclaim: "memory.available=5%",
			want: []string{"memory.available<10% reclaiming 5%", "memory.available<30% for 30s reclaiming 5%"}},
		{name: "disk flag values",
			hard: "imagefs.available<150Mi,nodefs.available<100Mi", soft: "imagefs.available<300Mi,nodefs.available<200Mi",
			grace: "imagefs.available=30s,nodefs.available=30s", minReclaim: "imagefs.available=2Gi,nodefs.available=1Gi",
			want: []string{"imagefs.available<150Mi reclaiming 2Gi", "nodefs.available<100Mi reclaiming 1Gi",
				"imagefs.available<300Mi for 30s reclaiming 2Gi", "nodefs.available<200Mi for 30s reclaiming 1Gi"}},
		{name: "disk flag values in percentages",
			hard: "imagefs.available<15%,nodefs.available<10.5%", soft: "imagefs.available<30%,nodefs.available<20.5%",
			grace: "imagefs.available=30s,nodefs.available=30s", minReclaim: "imagefs.available=10%,nodefs.available=5%",
			want: []string{"imagefs.available<15% reclaiming 10%", "nodefs.available<10.5% reclaiming 5%",
				"imagefs.available<30% for 30s reclaiming 10%", "nodefs.available<20.5% for 30s reclaiming 5%"}},
		{name: "inode flag values",
			hard: "imagefs.inodesFree<150Mi,nodefs.inodesFree<100Mi", soft: "imagefs.inodesFree<300Mi,nodefs.inodesFree<200Mi",
			grace: "imagefs.inodesFree=30s,nodefs.inodesFree=30s", minReclaim: "imagefs.inodesFree=2Gi,nodefs.inodesFree=1Gi",
			want: []string{"imagefs.inodesFree<150Mi reclaiming 2Gi", "nodefs.inodesFree<100Mi reclaiming 1Gi",
				"imagefs.inodesFree<300Mi for 30s reclaiming 2Gi", "nodefs.inodesFree<200Mi for 30s reclaiming 1Gi"}},
		{name: "pid", hard: "pid.available<10%", soft: "pid.available<1000", grace: "pid.available=1m30s",
			want: []string{"pid.available<10%", "pid.available<1k for 1m30s"}},
		{name: "spaces and empty items as kubelet's map flags allow",
			hard: " memory.available < 100Mi ,, nodefs.available<10%", want: []string{"memory.available<100Mi", "nodefs.available<10%"}},
		{name: "0% and 100% turn a threshold off",
			hard: "memory.available<100Mi,nodefs.available<0%,imagefs.available<100%", want: []string{"memory.available<100Mi"}},
		{name: "a grace period of a signal without a soft threshold is ignored",
			hard: "memory.available<100Mi", grace: "nodefs.available=1m", want: []string{"memory.available<100Mi"}},

		{name: "containerfs signals (KEP-4191) parse", hard: "containerfs.available<10%,containerfs.inodesFree<5%",
			want: []string{"containerfs.available<10%", "containerfs.inodesFree<5%"}},
		{name: "invalid signal", hard: "mem.available<150Mi", wantErr: "unsupported eviction signal mem.available"},
		{name: "valid and invalid signal", hard: "memory.available<150Mi,invalid.foo<150Mi", wantErr: "unsupported eviction signal invalid.foo"},
		{name: "allocatable memory is not a signal of jetlet's", hard: "allocatableMemory.available<1Gi", wantErr: "unsupported eviction signal"},
		{name: "hard signal negative", hard: "memory.available<-150Mi", wantErr: "must be positive"},
		{name: "hard signal zero", hard: "memory.available<0", wantErr: "must be positive"},
		{name: "hard signal negative percentage", hard: "memory.available<-15%", wantErr: "must be >= 0%"},
		{name: "percentage above 100", hard: "memory.available<150%", wantErr: "must be <= 100%"},
		{name: "not a quantity", hard: "memory.available<lots", wantErr: "memory.available"},
		{name: "not a percentage", hard: "nodefs.available<ten%", wantErr: "ten%"},
		{name: "no operator", hard: "memory.available=100Mi", wantErr: "malformed pair"},
		{name: "soft signal negative", soft: "memory.available<-150Mi", grace: "memory.available=30s", wantErr: "must be positive"},
		{name: "duplicate signal", hard: "memory.available<150Mi,memory.available<100Mi", wantErr: "duplicate eviction signal memory.available"},
		{name: "soft without grace period", soft: "memory.available<150Mi", wantErr: "grace period must be specified for the soft eviction threshold memory.available"},
		{name: "negative grace period", soft: "memory.available<150Mi", grace: "memory.available=-30s", wantErr: "must be a positive value"},
		{name: "grace period not a duration", soft: "memory.available<150Mi", grace: "memory.available=soon", wantErr: "soon"},
		{name: "negative reclaim", minReclaim: "memory.available=-300Mi", wantErr: "negative eviction minimum reclaim specified for memory.available"},
		{name: "zero percentage reclaim", minReclaim: "memory.available=0%", wantErr: "must be positive"},
		{name: "duplicate reclaim", minReclaim: "memory.available=300Mi,memory.available=100Mi", wantErr: "duplicate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseThresholds(tc.hard, tc.soft, tc.grace, tc.minReclaim)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var strs []string
			for _, th := range got {
				strs = append(strs, th.String())
			}
			if !slices.Equal(strs, tc.want) {
				t.Fatalf("thresholds = %q; want %q", strs, tc.want)
			}
		})
	}
}

func TestDefaultEvictionHard(t *testing.T) {
	got, err := ParseThresholds(DefaultEvictionHard, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	var strs []string
	for _, th := range got {
		strs = append(strs, th.String())
	}
	want := []string{"memory.available<100Mi", "nodefs.available<10%", "imagefs.available<15%", "nodefs.inodesFree<5%", "imagefs.inodesFree<5%"}
	if !slices.Equal(strs, want) {
		t.Fatalf("defaults = %q; want kubelet's %q", strs, want)
	}
}

// A percentage is a float32 fraction of the capacity, as kubelet's, so that
// the amounts (which messages and allocatable show) are kubelet's to the
// byte: 10% of 100Gi is 10737418400, not 10737418240.
func TestThresholdAmount(t *testing.T) {
	tests := []struct {
		value    ThresholdValue
		capacity string
		want     string
	}{
		{ThresholdValue{Quantity: quantity("100Mi")}, "24Gi", "100Mi"},
		{ThresholdValue{Percentage: 0.1}, "1000", "100"},
		{ThresholdValue{Percentage: 0.15}, "27226542480", "4083981534"},
		{ThresholdValue{Percentage: 0.1}, "100Gi", "10737418400"},
		{ThresholdValue{Percentage: 0.1}, "0", "0"},
	}
	for _, tc := range tests {
		got := tc.value.amount(resource.MustParse(tc.capacity))
		if got.String() != tc.want {
			t.Errorf("%v of %s = %s; want %s", tc.value, tc.capacity, &got, tc.want)
		}
	}
}

func TestHardEvictionReservation(t *testing.T) {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("2"),
		corev1.ResourceMemory:           resource.MustParse("10Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	tests := []struct {
		name, hard, soft, grace string
		want                    corev1.ResourceList
	}{
		{name: "none", want: corev1.ResourceList{}},
		{name: "kubelet's defaults: memory and nodefs space, not imagefs or inodes", hard: DefaultEvictionHard,
			want: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi"), corev1.ResourceEphemeralStorage: *resource.NewQuantity(10737418400, resource.BinarySI)}},
		{name: "a percentage of memory", hard: "memory.available<10%",
			want: corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(1073741840, resource.BinarySI)}},
		{name: "soft thresholds reserve nothing", soft: "memory.available<1Gi,nodefs.available<20Gi", grace: "memory.available=1m,nodefs.available=1m",
			want: corev1.ResourceList{}},
		{name: "pid reserves nothing", hard: "pid.available<10%", want: corev1.ResourceList{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			thresholds, err := ParseThresholds(tc.hard, tc.soft, tc.grace, "")
			if err != nil {
				t.Fatal(err)
			}
			got := HardEvictionReservation(thresholds, capacity)
			if len(got) != len(tc.want) {
				t.Fatalf("reservation = %v; want %v", got, tc.want)
			}
			for name, q := range tc.want {
				if g := got[name]; g.Cmp(q) != 0 {
					t.Errorf("%s = %s; want %s", name, &g, &q)
				}
			}
		})
	}
}

// kubelet's TestAddContainerFsThresholds: containerfs takes nodefs's
// thresholds on one file system and with a split image fs, imagefs's with a
// dedicated one; a containerfs threshold of the flags is dropped.
func TestContainerFsThresholds(t *testing.T) {
	thresholds, err := ParseThresholds(
		"nodefs.available<100Mi,nodefs.inodesFree<100Mi,imagefs.available<150Mi,imagefs.inodesFree<300Mi,containerfs.available<1Mi",
		"nodefs.available<200Mi,nodefs.inodesFree<200Mi,imagefs.available<300Mi,imagefs.inodesFree<150Mi",
		"nodefs.available=1ns,nodefs.inodesFree=1ns,imagefs.available=1ns,imagefs.inodesFree=1ns",
		"nodefs.available=1Gi,nodefs.inodesFree=2Gi,imagefs.available=1.5Gi,imagefs.inodesFree=2Gi")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                    string
		dedicatedImageFs, split bool
		want                    []string
	}{
		{name: "single filesystem", want: []string{
			"containerfs.available<100Mi reclaiming 1Gi", "containerfs.inodesFree<100Mi reclaiming 2Gi",
			"containerfs.available<200Mi for 1ns reclaiming 1Gi", "containerfs.inodesFree<200Mi for 1ns reclaiming 2Gi"}},
		{name: "image filesystem", dedicatedImageFs: true, want: []string{
			"containerfs.available<150Mi reclaiming 1536Mi", "containerfs.inodesFree<300Mi reclaiming 2Gi",
			"containerfs.available<300Mi for 1ns reclaiming 1536Mi", "containerfs.inodesFree<150Mi for 1ns reclaiming 2Gi"}},
		{name: "container and image are separate", dedicatedImageFs: true, split: true, want: []string{
			"containerfs.available<100Mi reclaiming 1Gi", "containerfs.inodesFree<100Mi reclaiming 2Gi",
			"containerfs.available<200Mi for 1ns reclaiming 1Gi", "containerfs.inodesFree<200Mi for 1ns reclaiming 2Gi"}},
		{name: "writable layers split off nodefs's images: not kubelet's layout", split: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := containerFsThresholds(thresholds, tc.dedicatedImageFs, tc.split)
			var containerFs []string
			for i, th := range got {
				if isContainerFs(th.Signal) {
					containerFs = append(containerFs, th.String())
				} else if i >= len(thresholds)-1 {
					t.Errorf("threshold %d %v: the others keep their order, containerfs's after them", i, th)
				}
			}
			if !slices.Equal(containerFs, tc.want) {
				t.Errorf("containerfs thresholds %q\n want %q", containerFs, tc.want)
			}
		})
	}
}
