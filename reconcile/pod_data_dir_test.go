package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/test/fakecri"
)

// A pod's emptyDir (0777) and termination message file (0666) are the
// containers', whatever their uid; the directories above them are 0750, as
// kubelet's pods dir, so that the node's other users reach neither. A pods
// dir an older jetlet left 0755 is closed too.
func TestPodDataDirIsClosedToOtherUsers(t *testing.T) {
	for _, existing := range []os.FileMode{0, 0o755} {
		m, _ := newTestManager(t, fakecri.New())
		pods := filepath.Join(m.cfg.DataDir, "pods")
		if existing != 0 {
			if err := os.Mkdir(pods, existing); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(pods, existing|os.ModeSticky); err != nil {
				t.Fatal(err)
			}
		}
		pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"}, TerminationMessagePath: "/dev/termination-log",
			VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/s"}}})
		pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		if _, err := m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "img:1", podNetwork{}, false); err != nil {
			t.Fatal(err)
		}
		emptyDir, message := m.emptyDirPath("uid1", "scratch"), m.terminationMessageFile("uid1", "app", 0)
		want := map[string]os.FileMode{
			pods:                                 os.ModeDir | 0o750,
			m.podDataDir("uid1"):                 os.ModeDir | 0o750,
			filepath.Dir(emptyDir):               os.ModeDir | 0o750,
			filepath.Dir(filepath.Dir(emptyDir)): os.ModeDir | 0o750,
			emptyDir:                             os.ModeDir | 0o777,
			filepath.Dir(message):                os.ModeDir | 0o750,
			filepath.Dir(filepath.Dir(message)):  os.ModeDir | 0o750,
			message:                              0o666,
		}
		for path, mode := range want {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != mode {
				t.Errorf("pods dir made %v before: %s is %v, want %v", existing, path, fi.Mode(), mode)
			}
		}
	}
}
