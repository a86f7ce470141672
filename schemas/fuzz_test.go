package schemas

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecodeIntent checks that no body makes DecodeIntent panic, that every
// refusal is a non-empty ValidationErrors, and that what it accepts decodes
// again to an accepted intent.
func FuzzDecodeIntent(f *testing.F) {
	for _, dir := range []string{"valid", "invalid"} {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","pod":{"metadata":{"name":"a","namespace":"b","uid":"u1"},"spec":{"containers":[{"name":"c","image":"i"}]}}}`))
	f.Add([]byte(`{"pod":{"metadata":{"uid":"u1"},"spec":{"containers":[{"resources":{"limits":{"cpu":"1e400"}}}]}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		uid := PeekEnvelope(body).UID
		if uid == "" {
			uid = "u1"
		}
		in, err := DecodeIntent(body, IntentTarget{Node: "n1", UID: uid})
		if err != nil {
			var list ValidationErrors
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error is not a non-empty ValidationErrors: %T %v", err, err)
			}
			for _, e := range list {
				if e == nil || e.Kind == "" || e.Reason == "" {
					t.Fatalf("incomplete problem in %v", err)
				}
			}
			return
		}
		if in == nil || in.Pod == nil || string(in.Pod.UID) != uid {
			t.Fatalf("accepted without a pod of uid %q: %+v", uid, in)
		}
		again, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("accepted intent does not marshal: %v", err)
		}
		if _, err := DecodeIntent(again, IntentTarget{Node: "n1", UID: uid, MaxBodyBytes: 4 * DefaultMaxIntentBytes}); err != nil {
			t.Fatalf("accepted intent does not decode again: %v\n%s", err, again)
		}
	})
}
