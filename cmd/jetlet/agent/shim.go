package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"
)

const (
	shimName = "jetlet-shim"
	shimPkg  = "github.com/jetlet/jetlet/cmd/jetlet-shim"
	// shimBuildTimeout bounds building the shim on first use (a cold build
	// cache compiles the standard library it needs).
	shimBuildTimeout = 3 * time.Minute
)

// shimPath finds the embedded runtime's light per-pod shim: --runtime-shim
// when given; jetlet-shim beside this binary (as installed); else, for a development build of this
// module (`go run ./cmd/jetlet`), one built on first use into <data-dir>/bin
// with the go tool; else this binary itself, which hosts the shim too but
// costs some 20 MiB of memory per pod (said in the log).
func (a *agent) shimPath(ctx context.Context) string {
	if a.cfg.runtimeShim != "" {
		return a.cfg.runtimeShim
	}
	exe, err := os.Executable()
	if err != nil {
		a.log.Warn().Err(err).Msg("cannot find jetlet's own binary")
		return ""
	}
	beside := filepath.Join(filepath.Dir(exe), shimName)
	if isExecutableFile(beside) {
		return beside
	}
	built, err := a.buildShim(ctx)
	if err == nil {
		return built
	}
	a.log.Warn().Err(err).Str("wanted", beside).
		Msg("no " + shimName + " beside jetlet: each pod's shim is jetlet itself, about 20 MiB a pod instead of 2")
	return exe
}

// buildShim builds jetlet-shim into <data-dir>/bin when this binary is a
// development build of this module and the go tool is at hand. It rebuilds at
// every start (the build cache makes that quick), so the shim always matches
// the jetlet that starts it.
func (a *agent) buildShim(ctx context.Context) (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Main.Path != "github.com/jetlet/jetlet" || info.Main.Version != "(devel)" {
		return "", fmt.Errorf("not a development build of jetlet, so %s is not built on first use", shimName)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("cannot build %s: %w", shimName, err)
	}
	dir, err := filepath.Abs(filepath.Join(a.cfg.dataDir, "bin"))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, shimBuildTimeout)
	defer cancel()
	tmp := filepath.Join(dir, "."+shimName+".tmp")
	start := time.Now()
	out, err := exec.CommandContext(ctx, goTool, "build", "-o", tmp, shimPkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %v: %s", shimPkg, err, strings.TrimSpace(string(out)))
	}
	path := filepath.Join(dir, shimName)
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	a.log.Info().Str("shim", path).Dur("took_ms", time.Since(start)).Msg("built " + shimName + " for the embedded runtime")
	return path, nil
}

func isExecutableFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
