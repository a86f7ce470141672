package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// apiDataPluginDir is the plugin directory of a volume of API data
// (configMap, secret, downwardAPI, projected), kubelet's layout; "" for any
// other volume.
func apiDataPluginDir(v *corev1.Volume) string {
	switch {
	case v.ConfigMap != nil:
		return configMapPluginDir
	case v.Secret != nil:
		return secretPluginDir
	case v.DownwardAPI != nil:
		return downwardAPIPluginDir
	case v.Projected != nil:
		return projectedPluginDir
	}
	return ""
}

// apiDataVolumePath is <DataDir>/pods/<uid>/volumes/<plugin>/<volume>.
func (m *Kuberuntime) apiDataVolumePath(uid, plugin, volume string) string {
	return filepath.Join(m.podDataDir(uid), "volumes", plugin, volume)
}

// inMemory says whether a volume of API data lives on a tmpfs: secret,
// downwardAPI and projected volumes (whatever its sources), as kubelet's
// plugins wrap an emptyDir of medium Memory for them; configMap volumes stay
// on disk (kubelet's configmap plugin wraps a disk emptyDir).
func inMemory(v *corev1.Volume) bool {
	return v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil
}

// mountVolumes writes the pod's volumes of API data, as kubelet's volume
// manager mounts before a sync: on the first sync before anything is
// created, then on every sync of the running pod, so that a changed object
// reaches the files (atomically; nothing written when nothing changed).
// A volume that fails is a FailedMount event naming it and its object; when
// it was never written the sync stops there (the containers wait in
// ContainerCreating) and reports false, and the next sync tries again. A
// volume written before keeps its last content.
func (s *podOperation) mountVolumes(ctx context.Context) bool {
	var unmounted []string
	objs := s.m.podObjects(s.pod)
	for i := range s.pod.Spec.Volumes {
		v := &s.pod.Spec.Volumes[i]
		plugin := apiDataPluginDir(v)
		if plugin == "" {
			continue
		}
		dir := s.m.apiDataVolumePath(s.ref.UID, plugin, v.Name)
		err := s.setUpAPIDataVolume(objs, plugin, dir, v)
		if err == nil {
			continue
		}
		s.failedMount(ctx, v.Name, err)
		if _, err := os.Lstat(filepath.Join(dir, dataDirName)); errors.Is(err, fs.ErrNotExist) {
			unmounted = append(unmounted, v.Name)
		}
	}
	if len(unmounted) > 0 {
		s.result.SyncError = fmt.Errorf("unable to mount volumes: unmounted volumes=[%s]", strings.Join(unmounted, " "))
		return false
	}
	return true
}

// failedMount emits kubelet's FailedMount; each failure is its own event
// (its time in the id), as each failed pull is.
func (s *podOperation) failedMount(ctx context.Context, volume string, err error) {
	m := s.m
	now := m.cfg.Clock.Now()
	msg := fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", volume, err)
	ev := kubecontainer.NewEvent(m.cfg.NodeName, s.ref, schemas.EventFailedMount,
		hashID(s.ref.UID, volume, msg, strconv.FormatInt(now.UnixNano(), 10))+"."+string(schemas.EventFailedMount), now)
	ev.Reason, ev.Message = string(schemas.EventFailedMount), msg
	m.emit.Emit(ctx, ev)
}

// setUpAPIDataVolume builds the volume's payload, then makes its directory
// (a tmpfs when inMemory) and writes the payload atomically.
func (s *podOperation) setUpAPIDataVolume(objs *podObjects, plugin, dir string, v *corev1.Volume) error {
	payload, err := s.volumePayload(objs, v)
	if err != nil {
		return err
	}
	d := &corev1.EmptyDirVolumeSource{}
	if inMemory(v) {
		d.Medium = corev1.StorageMediumMemory
	}
	if err := s.m.setUpEmptyDir(plugin, dir, s.pod, d); err != nil {
		if d.Medium == corev1.StorageMediumMemory {
			return fmt.Errorf("%s volumes are kept in memory, never on disk: %w", strings.TrimPrefix(plugin, "kubernetes.io~"), err)
		}
		return err
	}
	var gid *int64
	if psc := s.pod.Spec.SecurityContext; psc != nil {
		gid = psc.FSGroup
	}
	_, err = atomicWriter{dir: dir, gid: gid, now: s.m.cfg.Clock.Now()}.write(payload)
	return err
}

func modeOr(mode *int32, def int32) int32 {
	if mode != nil {
		return *mode
	}
	return def
}

// volumePayload is what the volume holds, as kubelet's plugins collect it.
func (s *podOperation) volumePayload(objs *podObjects, v *corev1.Volume) (map[string]fileProjection, error) {
	switch {
	case v.ConfigMap != nil:
		src := v.ConfigMap
		return configMapPayload(objs, src.Name, src.Items, modeOr(src.DefaultMode, corev1.ConfigMapVolumeSourceDefaultMode), isTrue(src.Optional))
	case v.Secret != nil:
		src := v.Secret
		return secretPayload(objs, src.SecretName, src.Items, modeOr(src.DefaultMode, corev1.SecretVolumeSourceDefaultMode), isTrue(src.Optional))
	case v.DownwardAPI != nil:
		src := v.DownwardAPI
		return s.downwardAPIPayload(src.Items, modeOr(src.DefaultMode, corev1.DownwardAPIVolumeSourceDefaultMode))
	case v.Projected != nil:
		return s.projectedPayload(objs, v.Projected)
	}
	return nil, fmt.Errorf("volume %q holds no API data", v.Name)
}

func isTrue(b *bool) bool { return b != nil && *b }

// configMapPayload is kubelet's configmap.MakePayload: every key (Data and
// BinaryData) without items, else each item's key at its path; a missing
// key is an error unless optional. A missing optional ConfigMap is empty.
func configMapPayload(objs *podObjects, name string, items []corev1.KeyToPath, defaultMode int32, optional bool) (map[string]fileProjection, error) {
	cm, err := objs.configMap(name, optional)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{}
	if cm != nil {
		for k, v := range cm.Data {
			data[k] = []byte(v)
		}
		for k, v := range cm.BinaryData {
			data[k] = v
		}
	}
	return keysPayload(data, items, defaultMode, optional, func(key string) error {
		return missingKey(kubecontainer.KindConfigMap, objs.namespace, name, key)
	})
}

// secretPayload is configMapPayload's twin, kubelet's secret.MakePayload.
func secretPayload(objs *podObjects, name string, items []corev1.KeyToPath, defaultMode int32, optional bool) (map[string]fileProjection, error) {
	sec, err := objs.secret(name, optional)
	if err != nil {
		return nil, err
	}
	var data map[string][]byte
	if sec != nil {
		data = sec.Data
	}
	return keysPayload(data, items, defaultMode, optional, func(key string) error {
		return missingKey(kubecontainer.KindSecret, objs.namespace, name, key)
	})
}

func keysPayload(data map[string][]byte, items []corev1.KeyToPath, defaultMode int32, optional bool, missing func(key string) error) (map[string]fileProjection, error) {
	payload := make(map[string]fileProjection, len(data))
	if len(items) == 0 {
		for k, v := range data {
			payload[k] = fileProjection{data: v, mode: defaultMode}
		}
		return payload, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, missing(it.Key)
		}
		payload[it.Path] = fileProjection{data: v, mode: modeOr(it.Mode, defaultMode)}
	}
	return payload, nil
}

// downwardAPIPayload is kubelet's downwardapi.CollectData: each item's
// field or resource, through the downward API code env uses.
func (s *podOperation) downwardAPIPayload(items []corev1.DownwardAPIVolumeFile, defaultMode int32) (map[string]fileProjection, error) {
	payload := make(map[string]fileProjection, len(items))
	var errs []string
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = s.downwardFieldValue(it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			c := podContainer(s.pod, it.ResourceFieldRef.ContainerName)
			if c == nil {
				err = fmt.Errorf("resourceFieldRef: no container %q in the pod", it.ResourceFieldRef.ContainerName)
				break
			}
			v, err = s.m.resourceFieldValue(s.pod, c, it.ResourceFieldRef)
		default:
			err = fmt.Errorf("item %q: neither fieldRef nor resourceFieldRef", it.Path)
		}
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		payload[it.Path] = fileProjection{data: []byte(v), mode: modeOr(it.Mode, defaultMode)}
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return payload, nil
}

// downwardFieldValue is a downward API volume's fieldRef: the metadata
// fields, whole labels and annotations as kubelet's fieldpath.FormatMap
// writes them (key="value" lines, sorted).
func (s *podOperation) downwardFieldValue(path string) (string, error) {
	var all map[string]string
	switch path {
	case "metadata.labels":
		all = s.pod.Labels
	case "metadata.annotations":
		all = s.pod.Annotations
	default:
		if !strings.HasPrefix(path, "metadata.") {
			return "", fmt.Errorf("fieldRef %q: a downwardAPI volume exposes metadata fields only", path)
		}
		return s.m.podFieldValue(s.pod, path, s.net)
	}
	lines := make([]string, 0, len(all))
	for k, v := range all {
		lines = append(lines, k+"="+strconv.Quote(v))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), nil
}

// projectedPayload is kubelet's projected collectData: the sources' files
// together, each source's items under the volume's defaultMode.
// serviceAccountToken and clusterTrustBundle sources never get here (the
// decoder rejects them).
func (s *podOperation) projectedPayload(objs *podObjects, p *corev1.ProjectedVolumeSource) (map[string]fileProjection, error) {
	defaultMode := modeOr(p.DefaultMode, corev1.ProjectedVolumeSourceDefaultMode)
	payload := map[string]fileProjection{}
	var errs []string
	for i, src := range p.Sources {
		var part map[string]fileProjection
		var err error
		switch {
		case src.ConfigMap != nil:
			part, err = configMapPayload(objs, src.ConfigMap.Name, src.ConfigMap.Items, defaultMode, isTrue(src.ConfigMap.Optional))
		case src.Secret != nil:
			part, err = secretPayload(objs, src.Secret.Name, src.Secret.Items, defaultMode, isTrue(src.Secret.Optional))
		case src.DownwardAPI != nil:
			part, err = s.downwardAPIPayload(src.DownwardAPI.Items, defaultMode)
		default:
			err = fmt.Errorf("source %d: only configMap, secret and downwardAPI sources are supported", i)
		}
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		for k, f := range part {
			payload[k] = f
		}
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return payload, nil
}
