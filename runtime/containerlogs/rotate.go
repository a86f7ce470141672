// Package containerlogs is kubelet's container log manager: its Rotator
// rotates the CRI log file of every running container that outgrows a size,
// through the runtime's ReopenContainerLog, keeps a bounded number of rotated
// files (all but the newest compressed) and removes the oldest. Files lists a
// container's log files in order, for readers that follow a log across its
// rotations.
package containerlogs

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/periodic"
)

// Runtime is the part of the CRI the Rotator uses, with the signatures
// of *runtime.Client.
type Runtime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	ReopenContainerLog(ctx context.Context, id string) error
}

// Defaults, kubelet's.
const (
	DefaultMaxSize  = 10 << 20
	DefaultMaxFiles = 5
	DefaultInterval = 10 * time.Second
)

// Suffixes of the files a rotation leaves beside the log: <log>.<time>
// (the newest rotated file), <log>.<time>.gz, and <log>.<time>.tmp while
// it is being compressed.
const (
	compressedSuffix = ".gz"
	tmpSuffix        = ".tmp"
	// timeFormat sorts as it reads; nanoseconds keep two rotations in one
	// second apart.
	timeFormat = "20060102-150405.000000000"
)

// Config configures a Rotator.
type Config struct {
	// MaxSize is the size in bytes past which a log is rotated.
	MaxSize int64
	// MaxFiles is how many files a container's log may have, the current
	// one included; at least 2.
	MaxFiles int
	// Interval is how often every running container's log is looked at.
	Interval time.Duration
	Logger   zerolog.Logger
}

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = errors.New("invalid container log config")

// Rotator rotates the logs of the runtime's running containers.
type Rotator struct {
	rt  Runtime
	cfg Config
	log zerolog.Logger
	now func() time.Time

	// rotating is held by RotateAll: one round at a time.
	rotating sync.Mutex
	// logPaths are the log paths of the containers running at the last
	// round, by id (a container's never changes): a round asks the runtime
	// only for the new ones' status, not for each of a node's 2,000. Guarded
	// by rotating.
	logPaths map[string]string
}

// New returns a Rotator; it does nothing before Run.
func New(rt Runtime, cfg Config) (*Rotator, error) {
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	switch {
	case cfg.MaxSize < 1:
		return nil, fmt.Errorf("%w: max size %d bytes, want at least 1", ErrInvalidConfig, cfg.MaxSize)
	case cfg.MaxFiles < 2:
		return nil, fmt.Errorf("%w: max files %d, want at least 2 (the current file and one rotated)", ErrInvalidConfig, cfg.MaxFiles)
	case cfg.Interval < 0:
		return nil, fmt.Errorf("%w: interval %s", ErrInvalidConfig, cfg.Interval)
	}
	return &Rotator{rt: rt, cfg: cfg, log: cfg.Logger.With().Str("component", "containerlogs").Logger(), now: time.Now,
		logPaths: map[string]string{}}, nil
}

// Run rotates every interval until ctx is done.
func (m *Rotator) Run(ctx context.Context) {
	periodic.Every(ctx, m.cfg.Interval, func() {
		if err := m.RotateAll(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn().Err(err).Msg("container log rotation")
		}
	})
}

// RotateAll rotates the log of each running container that has outgrown
// MaxSize; one container's failure does not stop the others.
func (m *Rotator) RotateAll(ctx context.Context) error {
	running, err := m.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		return fmt.Errorf("list running containers: %w", err)
	}
	m.rotating.Lock()
	defer m.rotating.Unlock()
	paths := make(map[string]string, len(running))
	var errs []error
	for _, c := range running {
		path, known := m.logPaths[c.Id]
		if !known {
			resp, err := m.rt.ContainerStatus(ctx, c.Id, false)
			if err != nil {
				continue // gone meanwhile: nothing to rotate
			}
			path = resp.GetStatus().GetLogPath()
		}
		paths[c.Id] = path
		if path == "" {
			continue
		}
		info, err := os.Stat(path)
		if err != nil || info.Size() < m.cfg.MaxSize {
			continue
		}
		if err := m.rotate(ctx, c.Id, path); err != nil {
			errs = append(errs, fmt.Errorf("container %s: %w", c.Id, err))
		}
	}
	m.logPaths = paths
	return errors.Join(errs...)
}

// rotate moves the current log aside and has the runtime reopen it, at
// once (the container keeps writing meanwhile), then removes the oldest
// rotated files beyond MaxFiles and compresses all but the newest.
func (m *Rotator) rotate(ctx context.Context, id, path string) error {
	aside := path + "." + m.now().UTC().Format(timeFormat)
	if err := os.Rename(path, aside); err != nil {
		return fmt.Errorf("move the log aside: %w", err)
	}
	if err := m.rt.ReopenContainerLog(ctx, id); err != nil {
		// The runtime still writes to the file moved aside: put it back.
		if rerr := os.Rename(aside, path); rerr != nil {
			return errors.Join(fmt.Errorf("reopen the log: %w", err), fmt.Errorf("move the log back: %w", rerr))
		}
		return fmt.Errorf("reopen the log: %w", err)
	}
	m.log.Debug().Str("container", id).Str("rotated", aside).Msg("container log rotated")

	old, leftovers, err := rotated(path)
	if err != nil {
		return err
	}
	for _, f := range leftovers {
		_ = os.Remove(f)
	}
	// MaxFiles counts the current file.
	for len(old) > m.cfg.MaxFiles-1 {
		if err := os.Remove(old[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove the oldest rotated log: %w", err)
		}
		old = old[1:]
	}
	for _, f := range old[:len(old)-1] { // old ends with aside
		if !strings.HasSuffix(f, compressedSuffix) {
			if err := compress(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// compress replaces f with f.gz, through f.gz.tmp so that a crash leaves
// no truncated .gz.
func compress(f string) error {
	in, err := os.Open(f)
	if err != nil {
		return fmt.Errorf("compress rotated log: %w", err)
	}
	defer in.Close()
	tmp := f + compressedSuffix + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("compress rotated log: %w", err)
	}
	zw, _ := gzip.NewWriterLevel(out, gzip.BestSpeed) // a node's CPU is for its pods
	_, err = io.Copy(zw, in)
	err = errors.Join(err, zw.Close(), out.Close())
	if err == nil {
		err = os.Rename(tmp, f+compressedSuffix)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("compress rotated log %s: %w", f, err)
	}
	return os.Remove(f)
}

// rotated lists the files rotated from the log at path, oldest first, and
// what an interrupted compression left: its .tmp, or the uncompressed file
// whose .gz was complete.
func rotated(path string) (files, leftovers []string, err error) {
	matches, err := filepath.Glob(globEscape(path) + ".*")
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(matches)
	for _, f := range matches {
		if strings.HasSuffix(f, tmpSuffix) || (!strings.HasSuffix(f, compressedSuffix) && slices.Contains(matches, f+compressedSuffix)) {
			leftovers = append(leftovers, f)
		} else {
			files = append(files, f)
		}
	}
	return files, leftovers, nil
}

// Files lists the files of the log at path, oldest first: the rotated ones
// (compressed or not) then the current one, if it exists. A reader opens a
// .gz file with gzip.
func Files(path string) ([]string, error) {
	files, _, err := rotated(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err == nil {
		files = append(files, path)
	}
	return files, nil
}

// Remove removes the log at path and every file rotated from it.
func Remove(path string) error {
	files, err := filepath.Glob(globEscape(path) + ".*")
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range append(files, path) {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// globEscape quotes the pattern characters of a path for filepath.Glob.
func globEscape(path string) string {
	var b strings.Builder
	for _, r := range path {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Open opens one of the files Files lists for reading, uncompressing a .gz.
func Open(file string) (io.ReadCloser, error) {
	f, err := os.Open(file)
	if err != nil || !strings.HasSuffix(file, compressedSuffix) {
		return f, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return gzipFile{zr, f}, nil
}

// gzipFile closes the file under its gzip reader.
type gzipFile struct {
	*gzip.Reader
	f *os.File
}

func (g gzipFile) Close() error { return errors.Join(g.Reader.Close(), g.f.Close()) }
