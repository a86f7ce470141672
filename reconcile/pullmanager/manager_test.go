package pullmanager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// copyTestData puts kubelet's record files (testdata, as kubelet's own
// tests have them) into a records dir.
func copyTestData(t *testing.T, dir, sub string, names []string) {
	t.Helper()
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join("testdata", sub, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, sub, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// podSecretsOf is a pod's secrets as MustAttemptImagePull asks for them.
func podSecretsOf(s []ImagePullSecret) func() []ImagePullSecret {
	return func() []ImagePullSecret { return s }
}

func newManager(t *testing.T, dir string, policy Policy, allowlist ...string) *Manager {
	t.Helper()
	m, err := New(Config{Dir: dir, Policy: policy, Allowlist: allowlist})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const (
	recordedWithSecret = "sha256-b3c0cc4278800b03a308ceb2611161430df571ca733122f0a40ac8b9792a9064" // testimageref
	recordedEmpty      = "sha256-f8778b6393eaf39315e767a58cbeacf2c4b270d94b4d6926ee993d9e49444991" // testemptycredmapping
	recordedAnonymous  = "sha256-a2eace2182b24cdbbb730798e47b10709b9ef5e0f0c1624a3bc06c8ca987727a" // testimage-anonpull
	recordedBrokenHash = "sha256-38a8906435c4dd5f4258899d46621bfd8eea3ad6ff494ee3c2f17ef0321625bd" // test-brokenhash
	intentTestLatest   = "sha256-aef2af226629a35d5f3ef0fdbb29fdbebf038d0acd8850590e8c48e1e283aa56" // docker.io/testing/test:latest
)

// The rows of kubelet's TestFileBasedImagePullManager_MustAttemptImagePull
// (secrets; jetlet has no service account credentials), on kubelet's own
// record files: what decides whether a pod may use an image present.
func TestMustAttemptImagePull(t *testing.T) {
	theSecret := ImagePullSecret{UID: "testsecretuid", Namespace: "default", Name: "pull-secret", CredentialHash: "testsecrethash"}
	with := func(f func(*ImagePullSecret)) []ImagePullSecret {
		s := theSecret
		f(&s)
		return []ImagePullSecret{s}
	}
	tests := []struct {
		name       string
		policy     Policy
		podSecrets []ImagePullSecret
		image      string
		imageRef   string
		pulled     []string
		pulling    []string
		want       bool
		wantRecord *ImagePullCredentials // the record of image's name after, when it changed
		setup      func(*Manager)        // records made through the manager
	}{
		{name: "image exists and is recorded with pod's exact secret", podSecrets: []ImagePullSecret{theSecret},
			imageRef: "testimageref", pulled: []string{recordedWithSecret}, want: false},
		{name: "image exists and is recorded, no pod secrets",
			imageRef: "testimageref", pulled: []string{recordedWithSecret}, want: true},
		{name: "image exists and is recorded with the same secret but different credential hash",
			podSecrets: with(func(s *ImagePullSecret) { s.CredentialHash = "differenthash" }),
			imageRef:   "testimageref", pulled: []string{recordedWithSecret}, want: false,
			wantRecord: &ImagePullCredentials{KubernetesSecrets: with(func(s *ImagePullSecret) { s.CredentialHash = "differenthash" })}},
		{name: "image exists and is recorded with a different secret with a different UID",
			podSecrets: with(func(s *ImagePullSecret) { s.UID, s.CredentialHash = "different uid", "differenthash" }),
			imageRef:   "testimageref", pulled: []string{recordedWithSecret}, want: true},
		{name: "image exists and is recorded with a different secret",
			podSecrets: with(func(s *ImagePullSecret) { s.Namespace, s.CredentialHash = "differentns", "differenthash" }),
			imageRef:   "testimageref", pulled: []string{recordedWithSecret}, want: true},
		{name: "image exists and is recorded with a different secret with the same credential hash",
			podSecrets: with(func(s *ImagePullSecret) { s.Namespace = "differentns" }),
			imageRef:   "testimageref", pulled: []string{recordedWithSecret}, want: false,
			wantRecord: &ImagePullCredentials{KubernetesSecrets: append([]ImagePullSecret{theSecret}, with(func(s *ImagePullSecret) { s.Namespace = "differentns" })...)}},
		{name: "image exists but the pull is recorded under another image name", podSecrets: []ImagePullSecret{theSecret},
			image: "docker.io/testing/different:latest", imageRef: "testimageref", pulled: []string{recordedWithSecret}, want: true},
		{name: "image exists and is recorded with empty credential mapping",
			imageRef: "testemptycredmapping", pulled: []string{recordedEmpty}, want: true},
		{name: "image does not exist and there are no records of it", imageRef: "", want: true},
		{name: "image exists and there are no records of it with NeverVerifyPreloadedImages pull policy",
			imageRef: "testexistingref", want: false},
		{name: "image exists and there are no records of it with AlwaysVerify pull policy", policy: AlwaysVerify,
			imageRef: "testexistingref", want: true},
		{name: "image exists but is only recorded via pulling intent", podSecrets: []ImagePullSecret{theSecret},
			imageRef: "testexistingref", pulling: []string{intentTestLatest}, want: true},
		{name: "image exists but is only recorded via pulling intent - NeverVerify policy", policy: NeverVerify,
			podSecrets: []ImagePullSecret{theSecret}, imageRef: "testexistingref", pulling: []string{intentTestLatest}, want: false},
		{name: "image exists and is recorded as node-accessible, no pod secrets",
			imageRef: "testimage-anonpull", pulled: []string{recordedAnonymous}, want: false},
		{name: "image exists and is recorded as node-accessible, request with pod secrets", podSecrets: []ImagePullSecret{theSecret},
			imageRef: "testimage-anonpull", pulled: []string{recordedAnonymous}, want: false},
		{name: "image exists and is recorded with empty hash as its hashing originally failed, the same fail for a different pod secret",
			podSecrets: with(func(s *ImagePullSecret) { s.Namespace, s.CredentialHash = "differentns", "" }),
			imageRef:   "test-brokenhash", pulled: []string{recordedBrokenHash}, want: true},
		{name: "image exists and is recorded with empty hash as its hashing originally failed, the same fail for the same pod secret",
			podSecrets: with(func(s *ImagePullSecret) { s.CredentialHash = "" }),
			imageRef:   "test-brokenhash", pulled: []string{recordedBrokenHash}, want: false},
		{name: "a secret without a uid whose credential changed is not known to be the same secret",
			podSecrets: []ImagePullSecret{{Namespace: "default", Name: "pull-secret", CredentialHash: "differenthash"}},
			imageRef:   "nouidref", want: true, setup: func(m *Manager) {
				m.RecordImagePulled("docker.io/testing/test:latest", "nouidref", &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{
					{Namespace: "default", Name: "pull-secret", CredentialHash: "testsecrethash"}}})
			}},
		{name: "a secret without a uid with the recorded credential", podSecrets: []ImagePullSecret{{Namespace: "default", Name: "pull-secret", CredentialHash: "testsecrethash"}},
			imageRef: "nouidref", want: false, setup: func(m *Manager) {
				m.RecordImagePulled("docker.io/testing/test:latest", "nouidref", &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{
					{Namespace: "default", Name: "pull-secret", CredentialHash: "testsecrethash"}}})
			}},
		{name: "allowlisted image with records and no secrets", policy: NeverVerifyAllowlistedImages,
			imageRef: "testimageref", pulled: []string{recordedWithSecret}, want: false},
		{name: "image not allowlisted and without records", policy: NeverVerifyAllowlistedImages,
			image: "docker.io/other/image:1", imageRef: "testexistingref", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			copyTestData(t, dir, "pulled", tt.pulled)
			copyTestData(t, dir, "pulling", tt.pulling)
			policy := tt.policy
			if policy == "" {
				policy = DefaultPolicy
			}
			var allow []string
			if policy == NeverVerifyAllowlistedImages {
				allow = []string{"docker.io/testing/*"}
			}
			m := newManager(t, dir, policy, allow...)
			if tt.setup != nil {
				tt.setup(m)
			}
			image := tt.image
			if image == "" {
				image = "docker.io/testing/test:latest"
			}
			if got := m.MustAttemptImagePull(image, tt.imageRef, podSecretsOf(tt.podSecrets)); got != tt.want {
				t.Errorf("MustAttemptImagePull = %v, want %v", got, tt.want)
			}
			if tt.wantRecord == nil {
				return
			}
			rec, err := m.store.pulledRecord(tt.imageRef)
			if err != nil || rec == nil {
				t.Fatalf("record of %s: %v %v", tt.imageRef, rec, err)
			}
			if got := rec.CredentialMapping["docker.io/testing/test"]; !reflect.DeepEqual(got, *tt.wantRecord) {
				t.Errorf("record after the match:\n got %+v\nwant %+v", got, *tt.wantRecord)
			}
		})
	}
}

// The rows of kubelet's Test_pulledRecordMergeNewCreds.
func TestMergeCredentials(t *testing.T) {
	s := func(uid, ns, name, hash string) ImagePullSecret {
		return ImagePullSecret{UID: uid, Namespace: ns, Name: name, CredentialHash: hash}
	}
	sa := func(uid, ns, name string) ImagePullServiceAccount {
		return ImagePullServiceAccount{UID: uid, Namespace: ns, Name: name}
	}
	base := func() *ImagePulledRecord {
		return &ImagePulledRecord{ImageRef: "testImageRef", CredentialMapping: map[string]ImagePullCredentials{
			"test-image1":        {KubernetesSecrets: []ImagePullSecret{s("uid1", "namespace1", "name1", "hash1")}},
			"test-image2":        {KubernetesSecrets: []ImagePullSecret{s("uid1", "namespace1", "name1", "hash1"), s("uid2", "namespace2", "name2", "hash2")}},
			"test-image-with-sa": {KubernetesServiceAccounts: []ImagePullServiceAccount{sa("sa-uid1", "default", "sa1")}},
			"test-nodewide":      {NodePodsAccessible: true},
		}}
	}
	tests := []struct {
		name       string
		image      string
		creds      *ImagePullCredentials
		want       *ImagePullCredentials // the image's entry after; nil: unchanged
		wantUpdate bool
	}{
		{name: "create a new image record", image: "new-image",
			creds:      &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{s("newuid", "newnamespace", "newname", "newhash")}},
			want:       &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{s("newuid", "newnamespace", "newname", "newhash")}},
			wantUpdate: true},
		{name: "merge with an existing image secret", image: "test-image1",
			creds:      &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{s("newuid", "newnamespace", "newname", "newhash")}},
			want:       &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{s("uid1", "namespace1", "name1", "hash1"), s("newuid", "newnamespace", "newname", "newhash")}},
			wantUpdate: true},
		{name: "merge with existing image record secrets", image: "test-image2",
			creds: &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{s("newuid", "namespace1", "newname", "newhash")}},
			want: &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{s("uid1", "namespace1", "name1", "hash1"),
				s("newuid", "namespace1", "newname", "newhash"), s("uid2", "namespace2", "name2", "hash2")}},
			wantUpdate: true},
		{name: "node-accessible overrides all secrets", image: "test-image2",
			creds: &ImagePullCredentials{NodePodsAccessible: true}, want: &ImagePullCredentials{NodePodsAccessible: true}, wantUpdate: true},
		{name: "new creds have the same secret coordinates but a different hash", image: "test-image2",
			creds:      &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{s("uid2", "namespace2", "name2", "newhash")}},
			want:       &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{s("uid1", "namespace1", "name1", "hash1"), s("uid2", "namespace2", "name2", "newhash")}},
			wantUpdate: true},
		{name: "new creds have the same hash but a different coordinates", image: "test-image2",
			creds: &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{s("uid3", "namespace2", "name3", "hash2")}},
			want: &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{s("uid1", "namespace1", "name1", "hash1"),
				s("uid2", "namespace2", "name2", "hash2"), s("uid3", "namespace2", "name3", "hash2")}},
			wantUpdate: true},
		{name: "merge with existing service account", image: "test-image-with-sa",
			creds:      &ImagePullCredentials{KubernetesServiceAccounts: []ImagePullServiceAccount{sa("new-sa-uid", "kube-system", "new-sa")}},
			want:       &ImagePullCredentials{KubernetesServiceAccounts: []ImagePullServiceAccount{sa("sa-uid1", "default", "sa1"), sa("new-sa-uid", "kube-system", "new-sa")}},
			wantUpdate: true},
		{name: "no update when service account is identical", image: "test-image-with-sa",
			creds: &ImagePullCredentials{KubernetesServiceAccounts: []ImagePullServiceAccount{sa("sa-uid1", "default", "sa1")}}},
		{name: "add secret to image with only service accounts", image: "test-image-with-sa",
			creds: &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{s("new-secret-uid", "default", "new-secret", "new-secret-hash")}},
			want: &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{s("new-secret-uid", "default", "new-secret", "new-secret-hash")},
				KubernetesServiceAccounts: []ImagePullServiceAccount{sa("sa-uid1", "default", "sa1")}},
			wantUpdate: true},
		{name: "no update when image already marked as node-accessible with secrets", image: "test-nodewide",
			creds: &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{s("any-uid", "any-namespace", "any-name", "any-hash")}}},
		{name: "nil credentials should not update", image: "test-image1"},
		{name: "empty credentials should not update", image: "test-image1", creds: &ImagePullCredentials{}},
		{name: "service account with same namespace and name but different UID", image: "test-image-with-sa",
			creds:      &ImagePullCredentials{KubernetesServiceAccounts: []ImagePullServiceAccount{sa("different-uid", "default", "sa1")}},
			want:       &ImagePullCredentials{KubernetesServiceAccounts: []ImagePullServiceAccount{sa("different-uid", "default", "sa1"), sa("sa-uid1", "default", "sa1")}},
			wantUpdate: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := base()
			before := base().CredentialMapping[tt.image]
			if got := mergeCredentials(rec, tt.image, tt.creds); got != tt.wantUpdate {
				t.Errorf("changed %v, want %v", got, tt.wantUpdate)
			}
			want := before
			if tt.want != nil {
				want = *tt.want
			}
			if got := rec.CredentialMapping[tt.image]; !reflect.DeepEqual(got, want) {
				t.Errorf("entry of %s:\n got %+v\nwant %+v", tt.image, got, want)
			}
		})
	}
}

// kubelet's allowlist patterns: full names without tag or digest, or
// prefixes ending in "/*"; anything else is refused at start.
func TestAllowlist(t *testing.T) {
	for _, bad := range []string{" docker.io/a/b", "docker.io/a/b:1", "busybox", "docker.io/*/b", "/*", "*", "docker.io/a@sha256:" + strings.Repeat("a", 64)} {
		if err := CheckPolicy(NeverVerifyAllowlistedImages, []string{bad}); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
	if err := CheckPolicy(NeverVerifyPreloadedImages, []string{"docker.io/a/b"}); err == nil {
		t.Error("an allowlist with another policy than NeverVerifyAllowlistedImages accepted")
	}
	if _, err := ParsePolicy("Sometimes"); err == nil {
		t.Error("an unknown policy accepted")
	}
	a, err := parseAllowlist([]string{"docker.io/library/busybox", "registry.example/team/*"})
	if err != nil {
		t.Fatal(err)
	}
	for image, want := range map[string]bool{
		"busybox":                        true,
		"docker.io/library/busybox:1.36": true,
		"docker.io/library/busyboxer":    false,
		"registry.example/team/app:1":    true,
		"registry.example/team/sub/app":  true,
		"registry.example/teams/app":     false,
		"registry.example/other/app@sha256:" + strings.Repeat("a", 64): false,
	} {
		if got := a.has(image); got != want {
			t.Errorf("allowlisted(%s) = %v, want %v", image, got, want)
		}
	}
}

type fakeImages []*runtimeapi.Image

func (f fakeImages) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return f, nil
}

// A pull under way when jetlet stopped: the next start turns its intent
// into a record without credentials, so a pod without the secret must pull
// (the pull may have been made with a secret never recorded), while an
// image no record or intent names stays preloaded.
func TestIntentLeftByAStopBecomesARecordWithoutCredentials(t *testing.T) {
	dir := t.TempDir()
	const image, short = "registry.example/team/app:1", "busybox:1.36"
	for _, in := range []string{image, short} {
		if err := newManager(t, dir, DefaultPolicy).RecordPullIntent(in); err != nil {
			t.Fatal(err)
		}
	}
	m := newManager(t, dir, DefaultPolicy)
	m.Initialize(t.Context(), fakeImages{{Id: "sha256:app", RepoTags: []string{image}}, {Id: "sha256:other", RepoTags: []string{"registry.example/team/other:1"}},
		{Id: "sha256:busybox", RepoTags: []string{"docker.io/library/busybox:1.36"}}})
	for _, in := range []string{image, short} {
		if ok, err := m.store.intentExists(in); ok || err != nil {
			t.Errorf("the intent of %s is still there (%v)", in, err)
		}
	}
	if !m.MustAttemptImagePull(short, "sha256:busybox", podSecretsOf(nil)) {
		t.Error("an image pulled under its short name by a jetlet that stopped is everyone's")
	}
	rec, err := m.store.pulledRecord("sha256:app")
	if err != nil || rec == nil || len(rec.CredentialMapping) != 0 {
		t.Fatalf("record %+v (%v), want one without credentials", rec, err)
	}
	if !m.MustAttemptImagePull(image, "sha256:app", podSecretsOf(nil)) {
		t.Error("a pod without credentials may use an image whose pull was never recorded")
	}
	if m.MustAttemptImagePull("registry.example/team/other:1", "sha256:other", podSecretsOf(nil)) {
		t.Error("a preloaded image must be pulled under NeverVerifyPreloadedImages")
	}
}

// A pull with a pod's secret: the record names the secret and its hash and
// a second manager on the same dir (jetlet restarted) reads it: the owner
// may use the image, another pod may not; a node-credential pull makes it
// everyone's. The file is kubelet's format and holds no credential.
func TestRecordsOfAPullSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	const image, ref = "registry.example/team/app:1", "sha256:app"
	auth := &runtimeapi.AuthConfig{Username: "u", Password: "pw-marker-4711"}
	owner := ImagePullSecret{UID: "u1", Namespace: "team-a", Name: "regcred", CredentialHash: CredentialHash(auth)}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m, err := New(Config{Dir: dir, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.RecordPullIntent(image); err != nil {
		t.Fatal(err)
	}
	m.RecordImagePulled(image, ref, &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{owner}})
	if ok, _ := m.store.intentExists(image); ok {
		t.Error("the intent outlives the pull")
	}

	data, err := os.ReadFile(filepath.Join(dir, "pulled", recordFileName(ref)))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","lastUpdatedTime":"2026-01-02T03:04:05Z","imageRef":"sha256:app",` +
		`"credentialMapping":{"registry.example/team/app":{"kubernetesSecrets":[{"uid":"u1","namespace":"team-a","name":"regcred","credentialHash":"` + owner.CredentialHash + `"}]}}}`
	if string(data) != want {
		t.Errorf("record file\n got %s\nwant %s", data, want)
	}
	if strings.Contains(string(data), auth.Password) {
		t.Error("the record holds the password")
	}
	if fi, err := os.Stat(filepath.Join(dir, "pulled", recordFileName(ref))); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("record file mode %v (%v), want 0600", fi.Mode(), err)
	}

	restarted := newManager(t, dir, DefaultPolicy)
	restarted.Initialize(t.Context(), fakeImages{{Id: ref, RepoTags: []string{image}}})
	if restarted.MustAttemptImagePull(image, ref, podSecretsOf([]ImagePullSecret{owner})) {
		t.Error("the secret that pulled the image must pull it again")
	}
	other := owner
	other.Namespace, other.CredentialHash = "team-b", CredentialHash(&runtimeapi.AuthConfig{Username: "u", Password: "wrong"})
	for _, secrets := range [][]ImagePullSecret{nil, {other}} {
		if !restarted.MustAttemptImagePull(image, ref, podSecretsOf(secrets)) {
			t.Errorf("a pod with secrets %v may use another tenant's image", secrets)
		}
	}
	restarted.RecordImagePulled(image, ref, &ImagePullCredentials{NodePodsAccessible: true})
	if restarted.MustAttemptImagePull(image, ref, podSecretsOf(nil)) {
		t.Error("an image pulled with the node's credentials is not everyone's")
	}
}

// kubelet's TestFileBasedImagePullManager_PruneUnknownRecords: the records
// of images the runtime no longer holds go, unless written since the
// garbage collection listed the images.
func TestPruneUnknownRecords(t *testing.T) {
	all := []string{recordedWithSecret, recordedEmpty, recordedAnonymous}
	gcStart := time.Date(2024, 12, 25, 0, 1, 0, 0, time.UTC) // after the records' 2024-10-21
	tests := []struct {
		name    string
		present []string
		until   time.Time
		want    []string
	}{
		{"all images present", []string{"testimage-anonpull", "testimageref", "testemptycredmapping"}, gcStart, all},
		{"remove all records on empty list from the GC", nil, gcStart, nil},
		{"remove all records on list of untracked images from the GC", []string{"untracked1", "different-untracked"}, gcStart, nil},
		{"remove records without a match in the image list from the GC", []string{"testimage-anonpull", "untracked1", "testimageref", "different-untracked"},
			gcStart, []string{recordedWithSecret, recordedAnonymous}},
		{"keep the records written after the listing", nil, time.Date(2024, 10, 21, 12, 26, 40, 0, time.UTC), all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			copyTestData(t, dir, "pulled", all)
			newManager(t, dir, DefaultPolicy).PruneUnknownRecords(tt.present, tt.until)
			entries, err := os.ReadDir(filepath.Join(dir, "pulled"))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("records left %v, want %v", got, want)
			}
		})
	}
}

// Pulls of one image by many pods at once, some failing, while others ask
// whether they may use it: every secret that pulled it is recorded, and
// the intent goes with the last pull.
func TestConcurrentPullsOfOneImage(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir, DefaultPolicy)
	const image, ref, pods = "registry.example/team/app:1", "sha256:app", 16
	var wg sync.WaitGroup
	for i := range pods {
		wg.Go(func() {
			if err := m.RecordPullIntent(image); err != nil {
				t.Error(err)
				return
			}
			secret := ImagePullSecret{UID: fmt.Sprint(i), Namespace: "ns", Name: fmt.Sprint("s", i), CredentialHash: fmt.Sprint("h", i)}
			m.MustAttemptImagePull(image, ref, podSecretsOf([]ImagePullSecret{secret}))
			if i%4 == 0 {
				m.RecordImagePullFailed(image)
				return
			}
			m.RecordImagePulled(image, ref, &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{secret}})
		})
	}
	wg.Wait()
	if ok, err := m.store.intentExists(image); ok || err != nil {
		t.Errorf("an intent outlives every pull (%v)", err)
	}
	rec, err := m.store.pulledRecord(ref)
	if err != nil || rec == nil {
		t.Fatalf("record: %v %v", rec, err)
	}
	if got, want := len(rec.CredentialMapping["registry.example/team/app"].KubernetesSecrets), pods-pods/4; got != want {
		t.Errorf("%d secrets recorded, want %d", got, want)
	}
}
