package pullmanager

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/internal/atomicfile"
)

// The records' group and version: kubelet writes v1beta1 (the types moved
// there from v1alpha1 when the feature went beta) and reads both.
const (
	recordsGroup      = "kubelet.config.k8s.io"
	recordsAPIVersion = recordsGroup + "/v1beta1"
	kindPullIntent    = "ImagePullIntent"
	kindPulledRecord  = "ImagePulledRecord"
	fileNamePrefix    = "sha256-"
)

// ImagePullIntent records a pull under way: kubelet's type of the same name.
// An intent left by a jetlet that stopped mid-pull makes the image count as
// pulled by jetlet (its credentials unknown) rather than as preloaded.
type ImagePullIntent struct {
	metav1.TypeMeta `json:",inline"`
	// Image is the container's image as pulled (default tag applied).
	Image string `json:"image"`
}

// ImagePulledRecord is what is known of the credentials that pulled an
// image: kubelet's type of the same name, one file per image ID.
type ImagePulledRecord struct {
	metav1.TypeMeta `json:",inline"`
	// LastUpdatedTime is when the record last changed.
	LastUpdatedTime metav1.Time `json:"lastUpdatedTime"`
	// ImageRef is the runtime's image ID.
	ImageRef string `json:"imageRef"`
	// CredentialMapping maps an image name without tag or digest
	// ("docker.io/library/busybox") to the credentials that pulled it.
	CredentialMapping map[string]ImagePullCredentials `json:"credentialMapping,omitempty"`
}

// ImagePullCredentials are the credentials an image was pulled with.
type ImagePullCredentials struct {
	// KubernetesSecrets are the pod pull secrets that pulled the image.
	KubernetesSecrets []ImagePullSecret `json:"kubernetesSecrets,omitempty"`
	// KubernetesServiceAccounts is kubelet's; jetlet has no service
	// account credential providers and writes none, and no pod matches one.
	KubernetesServiceAccounts []ImagePullServiceAccount `json:"kubernetesServiceAccounts,omitempty"`
	// NodePodsAccessible: the image was pulled with the node's credentials
	// or none, so every pod on the node may use it.
	NodePodsAccessible bool `json:"nodePodsAccessible,omitempty"`
}

// ImagePullSecret identifies a pull secret: its coordinates and a hash of
// the credential it gave for the image (CredentialHash), never the value.
type ImagePullSecret struct {
	UID            string `json:"uid"`
	Namespace      string `json:"namespace"`
	Name           string `json:"name"`
	CredentialHash string `json:"credentialHash"`
}

// ImagePullServiceAccount is kubelet's service account coordinates.
type ImagePullServiceAccount struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// recordStore keeps the records as kubelet's fsPullRecordsAccessor does:
// <dir>/pulling/sha256-<sha256 of the image> for intents and
// <dir>/pulled/sha256-<sha256 of the image ID> for pulled records, 0600 in
// 0700 directories, written atomically. Its callers serialise access.
type recordStore struct {
	pullingDir, pulledDir string
}

func newRecordStore(dir string) recordStore {
	return recordStore{pullingDir: filepath.Join(dir, "pulling"), pulledDir: filepath.Join(dir, "pulled")}
}

func recordFileName(key string) string {
	return fmt.Sprintf("%s%x", fileNamePrefix, sha256.Sum256([]byte(key)))
}

func writeRecord(dir, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, recordFileName(key)), data, 0o600)
}

// readRecord decodes one record strictly, as kubelet's strict decoder:
// an unknown field, another kind or a group version other than
// v1alpha1/v1beta1 is an error. It returns false when there is no file.
func readRecord(path, kind string, v any) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, decodeRecord(data, kind, v)
}

func decodeRecord(data []byte, kind string, v any) error {
	var meta metav1.TypeMeta
	if err := json.Unmarshal(data, &meta); err != nil {
		return fmt.Errorf("not a %s: %w", kind, err)
	}
	group, version, _ := strings.Cut(meta.APIVersion, "/")
	if meta.Kind != kind || group != recordsGroup || (version != "v1alpha1" && version != "v1beta1") {
		return fmt.Errorf("kind %q apiVersion %q, want %s of %s/v1beta1 or v1alpha1", meta.Kind, meta.APIVersion, kind, recordsGroup)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("not a %s: %w", kind, err)
	}
	return nil
}

func (s recordStore) writeIntent(image string) error {
	return writeRecord(s.pullingDir, image, &ImagePullIntent{
		TypeMeta: metav1.TypeMeta{Kind: kindPullIntent, APIVersion: recordsAPIVersion}, Image: image})
}

// intentExists: a file for image exists and names it (not a hash collision).
func (s recordStore) intentExists(image string) (bool, error) {
	var in ImagePullIntent
	ok, err := readRecord(filepath.Join(s.pullingDir, recordFileName(image)), kindPullIntent, &in)
	return ok && err == nil && in.Image == image, err
}

func (s recordStore) deleteIntent(image string) error {
	return removeIfExists(filepath.Join(s.pullingDir, recordFileName(image)))
}

func (s recordStore) listIntents() ([]*ImagePullIntent, error) {
	var out []*ImagePullIntent
	err := eachRecordFile(s.pullingDir, func(path string, data []byte) error {
		in := new(ImagePullIntent)
		if err := decodeRecord(data, kindPullIntent, in); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, in)
		return nil
	})
	return out, err
}

// pulledRecord is the record of imageRef; nil without an error when there
// is none (or the file is another image's).
func (s recordStore) pulledRecord(imageRef string) (*ImagePulledRecord, error) {
	rec := new(ImagePulledRecord)
	ok, err := readRecord(filepath.Join(s.pulledDir, recordFileName(imageRef)), kindPulledRecord, rec)
	if !ok || err != nil || rec.ImageRef != imageRef {
		return nil, err
	}
	return rec, nil
}

func (s recordStore) writePulledRecord(rec *ImagePulledRecord) error {
	rec.TypeMeta = metav1.TypeMeta{Kind: kindPulledRecord, APIVersion: recordsAPIVersion}
	return writeRecord(s.pulledDir, rec.ImageRef, rec)
}

func (s recordStore) deletePulledRecord(imageRef string) error {
	return removeIfExists(filepath.Join(s.pulledDir, recordFileName(imageRef)))
}

func (s recordStore) listPulledRecords() ([]*ImagePulledRecord, error) {
	var out []*ImagePulledRecord
	err := eachRecordFile(s.pulledDir, func(path string, data []byte) error {
		rec := new(ImagePulledRecord)
		if err := decodeRecord(data, kindPulledRecord, rec); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// eachRecordFile calls f with each record file of dir (sha256-*; temporary
// files start with a dot), going on past failures, which it joins. A dir
// that does not exist holds none.
func eachRecordFile(dir string, f func(path string, data []byte) error) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() || !strings.HasPrefix(e.Name(), fileNamePrefix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err == nil {
			err = f(path, data)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
