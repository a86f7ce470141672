package kubecontainer

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/jetlet/jetlet/schemas"
)

// A failed action is classified by its typed error inside, and is the kubelet
// error's name and the human text on the wire.
func TestPodSyncResultEdge(t *testing.T) {
	var r PodSyncResult
	r.Add(schemas.ActionCreatePodSandbox, "uid1", "sb1")
	r.Fail(schemas.ActionStartContainer, "app", ErrCrashLoopBackOff, "back-off 10s restarting failed container=app pod=ns/p")
	r.Fail(schemas.ActionPullImage, "side", ErrImagePull, `Failed to pull image "img:1": no such image`)

	want := []schemas.ActionResult{
		{Action: schemas.ActionCreatePodSandbox, Target: "uid1", Message: "sb1"},
		{Action: schemas.ActionStartContainer, Target: "app", Error: "CrashLoopBackOff", Message: "back-off 10s restarting failed container=app pod=ns/p"},
		{Action: schemas.ActionPullImage, Target: "side", Error: "ErrImagePull", Message: `Failed to pull image "img:1": no such image`},
	}
	if got := r.ActionResults(); !reflect.DeepEqual(got, want) {
		t.Errorf("ActionResults() = %+v, want %+v", got, want)
	}

	err := r.Error()
	for _, sentinel := range []error{ErrCrashLoopBackOff, ErrImagePull} {
		if !errors.Is(err, sentinel) {
			t.Errorf("errors.Is(%v, %v) = false", err, sentinel)
		}
	}
	if errors.Is(err, ErrImagePullBackOff) {
		t.Errorf("errors.Is(%v, ErrImagePullBackOff) = true", err)
	}
	var ae *ActionError
	if !errors.As(err, &ae) || ae.Action != schemas.ActionStartContainer || ae.Target != "app" {
		t.Errorf("errors.As: %+v, want the failed StartContainer of app", ae)
	}
	const text = `StartContainer "app": CrashLoopBackOff: back-off 10s restarting failed container=app pod=ns/p; ` +
		`PullImage "side": ErrImagePull: Failed to pull image "img:1": no such image`
	if err.Error() != text {
		t.Errorf("Error() = %q, want %q", err.Error(), text)
	}
}

// No action is no error, and [] (not null) on the wire.
func TestPodSyncResultEmpty(t *testing.T) {
	var r PodSyncResult
	if err := r.Error(); err != nil {
		t.Errorf("Error() = %v, want nil", err)
	}
	b, _ := json.Marshal(r.ActionResults())
	if string(b) != "[]" {
		t.Errorf("ActionResults() marshals to %s, want []", b)
	}
}
