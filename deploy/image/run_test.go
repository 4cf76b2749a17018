package image

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/proc"
)

// buildah runs Debian's buildah on the storage `make image` builds into (bin/image/storage, vfs:
// no overlay mounts, which this machine's container refuses).
type buildah struct {
	path  string
	flags []string
}

func findBuildah(t *testing.T) buildah {
	t.Helper()
	path, err := exec.LookPath("buildah")
	if err != nil {
		requireOrSkip(t, "buildah not found in PATH: `make image` installs it (Debian's package buildah)")
	}
	dir := filepath.Join(root, "bin", "image")
	return buildah{path: path, flags: []string{
		"--root", filepath.Join(dir, "storage"), "--runroot", filepath.Join(dir, "run"), "--storage-driver", "vfs",
	}}
}

func (b buildah) command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, b.path, append(slices.Clone(b.flags), args...)...)
}

// output runs buildah and returns its standard output; its standard error is in the error.
func (b buildah) output(ctx context.Context, args ...string) (string, error) {
	cmd := b.command(ctx, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("buildah %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// container creates a working container from a docker archive, as `docker load` then `docker
// create` would, and removes it when the test ends.
func (b buildah) container(ctx context.Context, t *testing.T, archive string) string {
	t.Helper()
	name := fmt.Sprintf("retryring-image-test-%d", os.Getpid())
	if _, err := b.output(ctx, "from", "--name", name, "docker-archive:"+archive); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := b.output(ctx, "rm", name); err != nil {
			t.Errorf("remove the test's container: %v", err)
		}
	})
	return name
}

// runArgs is what a container runtime runs for `run IMAGE args...`: the image's entrypoint, then
// the arguments; chroot isolation needs neither a daemon nor cgroups and shares the host's network.
func runArgs(container string, entrypoint []string, args ...string) []string {
	run := []string{"run", "--isolation", "chroot", container, "--"}
	return append(append(run, entrypoint...), args...)
}

// TestCoordinatorRunsFromImage runs the image from its docker archive: `version` names the
// repository's commit, and a single-node coordinator, its Raft data where the chart mounts its
// volume, answers /healthz and /readyz on loopback and writes its files as the image's user.
func TestCoordinatorRunsFromImage(t *testing.T) {
	c := readChart(t)
	dockerPath, _ := archivePaths(t, c)
	b := findBuildah(t)
	cfg := openDockerArchive(t, dockerPath).config(t).Config
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	container := b.container(ctx, t, dockerPath)

	out, err := b.output(ctx, runArgs(container, cfg.Entrypoint, "version", "-o", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	var version struct{ Version, Commit string }
	if err := json.Unmarshal([]byte(out), &version); err != nil {
		t.Fatalf("version -o json printed %q: %v", out, err)
	}
	if head := gitHead(t); version.Commit != head {
		t.Errorf("retryring version in the image says commit %q, the repository is at %s (run `make image` again)", version.Commit, head)
	}

	addrs := make([]string, 3)
	for i := range addrs {
		if addrs[i], err = proc.FreeAddr(); err != nil {
			t.Fatal(err)
		}
	}
	raftAddr, rsocketAddr, httpAddr := addrs[0], addrs[1], addrs[2]
	dataDir := homePath + "/raft"
	exited, logPath := startInBackground(t, b.command(ctx, runArgs(container, cfg.Entrypoint, "coordinator",
		"--node-id", "c1", "--raft-addr", raftAddr, "--rsocket-addr", rsocketAddr, "--http-addr", httpAddr,
		"--data-dir", dataDir)...))
	for _, path := range []string{"/healthz", "/readyz"} {
		if err := waitOK(ctx, "http://"+httpAddr+path, exited); err != nil {
			t.Fatalf("the coordinator in the image: %v\n%s", err, readTail(logPath))
		}
	}

	mount, err := b.output(ctx, "mount", container)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := b.output(context.Background(), "umount", container); err != nil {
			t.Errorf("unmount the test's container: %v", err)
		}
	}()
	// Only the process could have made these files, so their owner is the user it ran as.
	files := 0
	rootfs := strings.TrimSpace(mount)
	err = filepath.WalkDir(filepath.Join(rootfs, dataDir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st := info.Sys().(*syscall.Stat_t); int(st.Uid) != c.uid || int(st.Gid) != c.gid {
			return fmt.Errorf("%s is owned by %d:%d: the coordinator ran as %[2]d:%[3]d, want %d:%d",
				strings.TrimPrefix(path, rootfs), st.Uid, st.Gid, c.uid, c.gid)
		}
		files++
		return nil
	})
	if err != nil {
		t.Errorf("the coordinator's data dir in the container: %v", err)
	} else if files < 2 {
		t.Errorf("the coordinator wrote nothing in %s", dataDir)
	}
}

// startInBackground starts cmd, its output in a file, and stops it when the test ends: SIGTERM to
// buildah, which ends the container's process; SIGKILL to the whole process group if it lingers.
func startInBackground(t *testing.T, cmd *exec.Cmd) (exited <-chan struct{}, logPath string) {
	t.Helper()
	logPath = filepath.Join(t.TempDir(), "coordinator.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	return done, logPath
}

// waitOK polls url until it answers 200, the process exits or ctx ends.
func waitOK(ctx context.Context, url string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := "no answer"
	for {
		if resp, err := client.Get(url); err != nil {
			last = err.Error()
		} else {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		}
		select {
		case <-exited:
			return fmt.Errorf("GET %s: exited before answering 200 (last: %s)", url, last)
		case <-ctx.Done():
			return fmt.Errorf("GET %s: no 200 before %w (last: %s)", url, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// readTail is the end of a log file, for a failure message.
func readTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
