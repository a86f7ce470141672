package imagegc

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestNodeImagesAsKubeletsNodeStatus(t *testing.T) {
	many := func(n int) []*runtimeapi.Image {
		var out []*runtimeapi.Image
		for i := range n {
			out = append(out, &runtimeapi.Image{Id: fmt.Sprintf("sha256:%03d", i), Size: uint64(i + 1), RepoTags: []string{fmt.Sprintf("img:%d", i)}})
		}
		return out
	}
	tests := []struct {
		name   string
		images []*runtimeapi.Image
		check  func(t *testing.T, got []corev1.ContainerImage)
	}{
		{
			name: "largest first, equal sizes by the greater id, digests before tags",
			images: []*runtimeapi.Image{
				{Id: "sha256:a", Size: 10, RepoTags: []string{"a:1"}},
				{Id: "sha256:b", Size: 30, RepoTags: []string{"b:1", "b:2"}, RepoDigests: []string{"b@sha256:d"}},
				{Id: "sha256:c", Size: 10, RepoDigests: []string{"c@sha256:d"}},
				{Id: "sha256:none", Size: 5},
			},
			check: func(t *testing.T, got []corev1.ContainerImage) {
				want := []corev1.ContainerImage{
					{Names: []string{"b@sha256:d", "b:1", "b:2"}, SizeBytes: 30},
					{Names: []string{"c@sha256:d"}, SizeBytes: 10},
					{Names: []string{"a:1"}, SizeBytes: 10},
					{Names: []string{}, SizeBytes: 5},
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("got %+v, want %+v", got, want)
				}
			},
		},
		{
			name: "at most 5 names of an image",
			images: []*runtimeapi.Image{{Id: "sha256:a", Size: 1,
				RepoDigests: []string{"d1", "d2"}, RepoTags: []string{"t1", "t2", "t3", "t4"}}},
			check: func(t *testing.T, got []corev1.ContainerImage) {
				if want := []string{"d1", "d2", "t1", "t2", "t3"}; len(got) != 1 || !reflect.DeepEqual(got[0].Names, want) {
					t.Fatalf("got %+v, want the names %v", got, want)
				}
			},
		},
		{
			name:   "the 50 largest of 60",
			images: many(60),
			check: func(t *testing.T, got []corev1.ContainerImage) {
				if len(got) != 50 || got[0].SizeBytes != 60 || got[49].SizeBytes != 11 {
					t.Fatalf("got %d images, sizes %d to %d; want 50, sizes 60 to 11", len(got), got[0].SizeBytes, got[len(got)-1].SizeBytes)
				}
			},
		},
		{
			name: "no images",
			check: func(t *testing.T, got []corev1.ContainerImage) {
				if len(got) != 0 {
					t.Fatalf("got %+v, want none", got)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, nodeImages(tt.images))
		})
	}
}

// While the runtime cannot list images, the node keeps reporting the last
// list it could, as kubelet's image cache.
func TestNodeImagesKeepsTheLastListWhileTheRuntimeCannotList(t *testing.T) {
	rt := newFakeRuntime()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	m, err := New(rt, Config{Policy: DefaultPolicy(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	rt.setListErr(errInjected)
	if got := m.NodeImages(context.Background()); got != nil {
		t.Fatalf("before any list: %+v, want none", got)
	}
	rt.setListErr(nil)
	rt.addImage("sha256:a", 10, false, "a:1")
	want := []corev1.ContainerImage{{Names: []string{"a:1"}, SizeBytes: 10}}
	if got := m.NodeImages(context.Background()); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	clock.Advance(nodeImagesRefresh)
	rt.setListErr(errInjected)
	rt.addImage("sha256:b", 20, false, "b:1")
	if got := m.NodeImages(context.Background()); !reflect.DeepEqual(got, want) {
		t.Fatalf("while the runtime cannot list: %+v, want the last list %+v", got, want)
	}
}

// A list serves the node's status for nodeImagesRefresh, as kubelet's image
// cache: the record, written at every change of the node, asks the runtime
// nothing meanwhile; then a new list shows a new image.
func TestNodeImagesAreListedOncePerRefreshPeriod(t *testing.T) {
	rt := newFakeRuntime()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	m, err := New(rt, Config{Policy: DefaultPolicy(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	rt.addImage("sha256:a", 10, false, "a:1")
	first := m.NodeImages(context.Background())
	rt.addImage("sha256:b", 20, false, "b:1")
	clock.Advance(nodeImagesRefresh - time.Second)
	if got := m.NodeImages(context.Background()); !reflect.DeepEqual(got, first) {
		t.Fatalf("within the refresh period: %+v, want the first list %+v", got, first)
	}
	clock.Advance(time.Second)
	if got := m.NodeImages(context.Background()); len(got) != 2 || got[0].Names[0] != "b:1" {
		t.Fatalf("after the refresh period: %+v, want b:1 then a:1", got)
	}
}
