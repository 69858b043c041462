package awakentest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/awaken-dev/awaken/deploy"
)

// Module paths the image builds need.
const (
	modulePath     = "github.com/awaken-dev/awaken"
	natsServerPath = "github.com/nats-io/nats-server/v2"
	// fallbackNATSVersion is used when the build information does not name the
	// nats-server module (a binary built outside module mode).
	fallbackNATSVersion = "2.15.2"
)

// Images names the two images a deployment runs. Both are built FROM scratch on the local
// engine ([BuildImages], or `make images` in the repository); nothing is ever pulled.
type Images struct {
	// Awaken runs every service by subcommand (default "awaken:dev").
	Awaken string
	// NATS runs nats-server with the awaken NATS configuration (default
	// "awaken-nats:<nats-server version in go.mod>").
	NATS string
}

// DefaultImages returns the tags `make images` builds.
func DefaultImages() Images {
	return Images{Awaken: "awaken:dev", NATS: "awaken-nats:" + natsVersion()}
}

func (im Images) withDefaults() Images {
	d := DefaultImages()
	if im.Awaken == "" {
		im.Awaken = d.Awaken
	}
	if im.NATS == "" {
		im.NATS = d.NATS
	}
	return im
}

// natsVersion is the version of the nats-server module this binary was built with, which
// is the one go.mod pins, without its "v".
func natsVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == natsServerPath {
				if d.Replace != nil {
					d = d.Replace
				}
				return strings.TrimPrefix(d.Version, "v")
			}
		}
	}
	return fallbackNATSVersion
}

// RepoDir returns the root of the awaken module this package was compiled from: the
// repository for its own tests, the module cache for a platform team's. [BuildImages]
// builds from it.
//
// The source path compiled into this package is used when it is absolute; a build with
// -trimpath records a module-relative one, and then the go command, asked from the
// working directory, names the module's directory (`go list -m`).
func RepoDir() (string, error) {
	var dir string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	} else {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", modulePath).Output()
		if err != nil {
			return "", fmt.Errorf("awakentest: locate the %s module: go list -m: %w", modulePath, err)
		}
		if dir = strings.TrimSpace(string(out)); dir == "" {
			return "", fmt.Errorf("awakentest: go list -m names no directory for %s", modulePath)
		}
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("awakentest: module root: %w", err)
	}
	if !bytes.Contains(mod, []byte("module "+modulePath)) {
		return "", fmt.Errorf("awakentest: %s is not the %s module", dir, modulePath)
	}
	return dir, nil
}

// BuildImages builds both images from the awaken module at repoDir ("" means [RepoDir])
// with the go command on PATH, as `make images` does: static linux binaries of awaken,
// awaken-healthcheck and nats-server, the example WebAssembly tools, and the Dockerfiles
// and NATS configuration of package deploy. Layers are cached by the engine, so a rebuild
// of unchanged code is quick. Build output goes to logs (nil discards it).
//
// Tests that change awaken's code call it once per test binary (TestMain), so the
// containers never run stale code; [Run] only builds images that are missing.
func BuildImages(ctx context.Context, images Images, repoDir string, logs io.Writer) error {
	DisableRyuk()
	images = images.withDefaults()
	if logs == nil {
		logs = io.Discard
	}
	if repoDir == "" {
		var err error
		if repoDir, err = RepoDir(); err != nil {
			return err
		}
	}
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return fmt.Errorf("awakentest: docker: %w", err)
	}
	defer p.Close()
	arch := runtime.GOARCH
	if v, err := p.Client().ServerVersion(ctx, client.ServerVersionOptions{}); err == nil && v.Arch != "" {
		arch = v.Arch // the engine may run another architecture (a VM on a laptop)
	}
	stage, err := os.MkdirTemp("", "awakentest-images-")
	if err != nil {
		return fmt.Errorf("awakentest: %w", err)
	}
	defer os.RemoveAll(stage)

	start := time.Now()
	linux := []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + arch}
	static := []string{"build", "-trimpath", "-buildvcs=false", "-tags", "timetzdata", "-ldflags", "-s -w", "-o"}
	steps := []struct {
		env  []string
		args []string
	}{
		{linux, append(static, filepath.Join(stage, "awaken"), "./cmd/awaken")},
		{linux, append(static, filepath.Join(stage, "awaken-healthcheck"), "./cmd/awaken-healthcheck")},
		{linux, append(static, filepath.Join(stage, "nats-server"), natsServerPath)},
		{[]string{"CGO_ENABLED=0", "GOOS=wasip1", "GOARCH=wasm"},
			[]string{"build", "-trimpath", "-buildvcs=false", "-o", filepath.Join(stage, "wasm") + string(filepath.Separator), "./examples/sandbox-tools/..."}},
	}
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, "go", s.args...)
		cmd.Dir = repoDir
		cmd.Env = append(os.Environ(), s.env...)
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("awakentest: go %s: %w", strings.Join(s.args, " "), err)
		}
	}
	fmt.Fprintf(logs, "awakentest: binaries built in %s\n", time.Since(start).Round(time.Millisecond))

	wasm, err := filepath.Glob(filepath.Join(stage, "wasm", "*"))
	if err != nil || len(wasm) == 0 {
		return fmt.Errorf("awakentest: no WebAssembly tools built in %s", filepath.Join(stage, "wasm"))
	}
	awakenCtx := []entry{
		{name: "awaken", path: filepath.Join(stage, "awaken"), mode: 0o755},
		{name: "awaken.yaml", path: filepath.Join(repoDir, "examples", "awaken.yaml"), mode: 0o644},
		{name: "data/", dir: true},
		{name: "wasm/", dir: true},
	}
	for _, w := range wasm {
		awakenCtx = append(awakenCtx, entry{name: "wasm/" + filepath.Base(w) + ".wasm", path: w, mode: 0o644})
	}
	natsCtx := []entry{
		{name: "nats-server", path: filepath.Join(stage, "nats-server"), mode: 0o755},
		{name: "awaken-healthcheck", path: filepath.Join(stage, "awaken-healthcheck"), mode: 0o755},
		{name: "data/", dir: true},
		{name: "nats/", dir: true},
	}
	for _, f := range []string{deploy.NATSAuthConfig, deploy.NATSSingleConfig, deploy.NATSClusterConfig} {
		natsCtx = append(natsCtx, entry{name: f, asset: f, mode: 0o644})
	}
	for _, b := range []struct {
		tag, dockerfile string
		files           []entry
	}{
		{images.Awaken, deploy.AwakenDockerfile, awakenCtx},
		{images.NATS, deploy.NATSDockerfile, natsCtx},
	} {
		if err := buildImage(ctx, p, b.tag, b.dockerfile, b.files, logs); err != nil {
			return err
		}
	}
	fmt.Fprintf(logs, "awakentest: images %s and %s built in %s\n", images.Awaken, images.NATS, time.Since(start).Round(time.Millisecond))
	return nil
}

// entry is one file of a build context: from disk (path), from package deploy (asset),
// or a directory.
type entry struct {
	name  string
	path  string
	asset string
	dir   bool
	mode  int64
}

// buildImage builds tag from an in-memory context holding the Dockerfile and files.
func buildImage(ctx context.Context, p *testcontainers.DockerProvider, tag, dockerfile string, files []entry, logs io.Writer) error {
	df, err := deploy.ReadFile(dockerfile)
	if err != nil {
		return fmt.Errorf("awakentest: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	add := func(name string, data []byte, mode int64) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := add("Dockerfile", df, 0o644); err != nil {
		return fmt.Errorf("awakentest: build context: %w", err)
	}
	for _, f := range files {
		if f.dir {
			if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o755, ModTime: now, Typeflag: tar.TypeDir}); err != nil {
				return fmt.Errorf("awakentest: build context: %w", err)
			}
			continue
		}
		var data []byte
		if f.asset != "" {
			data, err = deploy.ReadFile(f.asset)
		} else {
			data, err = os.ReadFile(f.path)
		}
		if err != nil {
			return fmt.Errorf("awakentest: build context: %w", err)
		}
		if err := add(f.name, data, f.mode); err != nil {
			return fmt.Errorf("awakentest: build context: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("awakentest: build context: %w", err)
	}
	repo, version, _ := strings.Cut(tag, ":")
	if version == "" {
		version = "latest"
	}
	var previous string
	if old, err := p.Client().ImageInspect(ctx, tag); err == nil {
		previous = old.ID
	}
	_, err = p.BuildImage(ctx, &testcontainers.ContainerRequest{FromDockerfile: testcontainers.FromDockerfile{
		ContextArchive: bytes.NewReader(buf.Bytes()),
		Dockerfile:     "Dockerfile",
		Repo:           repo,
		Tag:            version,
		KeepImage:      true,
		BuildLogWriter: logs,
	}})
	if err != nil {
		return fmt.Errorf("awakentest: build %s: %w", tag, err)
	}
	// A rebuild of changed code leaves the previous image untagged: remove it, so test
	// runs do not pile up images. An image still used by a container stays (error ignored).
	if now, err := p.Client().ImageInspect(ctx, tag); err == nil && previous != "" && now.ID != previous {
		_, _ = p.Client().ImageRemove(ctx, previous, client.ImageRemoveOptions{})
	}
	return nil
}

// missingImages returns the images of im the engine does not have.
func missingImages(ctx context.Context, p *testcontainers.DockerProvider, im Images) ([]string, error) {
	var missing []string
	for _, ref := range []string{im.Awaken, im.NATS} {
		if _, err := p.Client().ImageInspect(ctx, ref); err != nil {
			if cerrdefs.IsNotFound(err) {
				missing = append(missing, ref)
				continue
			}
			return nil, fmt.Errorf("awakentest: inspect image %s: %w", ref, err)
		}
	}
	return missing, nil
}
