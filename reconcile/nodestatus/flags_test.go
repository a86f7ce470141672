package nodestatus

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestParseReserved(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    corev1.ResourceList
		wantErr string
	}{
		{in: "", want: corev1.ResourceList{}},
		{in: "cpu=100m, memory=256Mi,ephemeral-storage=1Gi", want: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
		}},
		{in: "pid=1000", wantErr: "cannot reserve pid"},
		{in: "cpu", wantErr: "want name=quantity"},
		{in: "cpu=lots", wantErr: `"cpu=lots"`},
		{in: "memory=-1Gi", wantErr: "cannot be negative"},
		{in: "cpu=1,cpu=2", wantErr: "cpu reserved twice"},
	} {
		got, err := ParseReserved(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseReserved(%q) = %v, want an error with %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !equalLists(got, tc.want) {
			t.Errorf("ParseReserved(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseLabels(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    map[string]string
		wantErr string
	}{
		{in: "", want: map[string]string{}},
		{in: "disk=ssd,example.com/team=a", want: map[string]string{"disk": "ssd", "example.com/team": "a"}},
		{in: "topology.kubernetes.io/zone=z1,node.kubernetes.io/pool=p,x.kubelet.kubernetes.io/y=1",
			want: map[string]string{"topology.kubernetes.io/zone": "z1", "node.kubernetes.io/pool": "p", "x.kubelet.kubernetes.io/y": "1"}},
		{in: "node-role.kubernetes.io/master=", wantErr: "may not set"},
		{in: "team.k8s.io/x=1", wantErr: "may not set"},
		{in: "disk", wantErr: "want key=value"},
		{in: "bad key=1", wantErr: `label key "bad key"`},
		{in: "k=bad value", wantErr: `value "bad value"`},
	} {
		got, err := ParseLabels(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseLabels(%q) = %v, want an error with %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseLabels(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestLabelsKeepKubeletsOwn(t *testing.T) {
	got := Labels("n1", map[string]string{LabelHostname: "other", "disk": "ssd"})
	if got[LabelHostname] != "n1" || got["disk"] != "ssd" || got[LabelOS] != "linux" || got[LabelArch] == "" {
		t.Errorf("Labels = %v", got)
	}
}

func TestParseTaints(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []corev1.Taint
		wantErr string
	}{
		{in: ""},
		{in: "dedicated=gpu:NoSchedule,maintenance:NoExecute,soft=x:PreferNoSchedule", want: []corev1.Taint{
			{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
			{Key: "maintenance", Effect: corev1.TaintEffectNoExecute},
			{Key: "soft", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule},
		}},
		{in: "k=v", wantErr: "want key[=value]:effect"},
		{in: "k=v:Sometimes", wantErr: `effect "Sometimes"`},
		{in: "=v:NoSchedule", wantErr: "key"},
		{in: "k=v w:NoSchedule", wantErr: "value"},
		{in: "k=a:NoSchedule,k=b:NoSchedule", wantErr: "twice"},
	} {
		got, err := ParseTaints(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseTaints(%q) = %v, want an error with %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseTaints(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// equalLists compares resource lists by value (1000m is 1).
func equalLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if w, ok := b[k]; !ok || q.Cmp(w) != 0 {
			return false
		}
	}
	return true
}
