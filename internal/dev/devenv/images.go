package devenv

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The images real nodes run, under the names the kubelet and the chart ask
// for, so that no kubelet ever tries to pull: no registry is reachable.
const (
	// pauseImage is every pod's sandbox (containerd's pinned sandbox image).
	pauseImage = "registry.k8s.io/pause:3.10.2"
	// AgnhostImage is Kubernetes' test server (netexec and friends), built
	// from the k8s.io/kubernetes module at the pinned version.
	AgnhostImage = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"
	// ProxyEchoImage answers each TCP connection with the client address
	// its PROXY protocol header carries (internal/dev/devenv/proxyecho).
	ProxyEchoImage = "stratus-dev/proxyecho:dev"
	// ManagerImageRepository and ManagerImageTag name the stratus-ccm image
	// the chart runs on real nodes.
	ManagerImageRepository = "ghcr.io/stratus-ccm/stratus-ccm"
	ManagerImageTag        = "dev"
)

// imageSpec is a one-layer image: a binary, the files it needs, and how to
// run it.
type imageSpec struct {
	ref string
	// bin is the binary's path on this machine, put at path in the image.
	bin, path string
	// files are more files of this machine in the image (tools and the
	// shared libraries they load), links its symbolic links.
	files []imageFile
	links []imageLink
	// env is added to the image's environment (after PATH).
	env        []string
	entrypoint []string
	// user, if set, is the user the image runs as (uid:gid).
	user string
}

// imageFile is a file of this machine (src) at path in an image, or, when
// data is set, a file of that content (a configuration file).
type imageFile struct {
	src, path string
	data      []byte
}

// content returns what the file holds in the image.
func (f imageFile) content() ([]byte, error) {
	if f.data != nil {
		return f.data, nil
	}
	return os.ReadFile(f.src)
}

// imageLink is a symbolic link at path in an image pointing to target.
type imageLink struct{ path, target string }

// allFiles returns the binary and the other files of s.
func (s imageSpec) allFiles() []imageFile {
	return append([]imageFile{{src: s.bin, path: s.path}}, s.files...)
}

// sum identifies what s puts in its image: every file's content and
// place, every link, and the configuration.
func (s imageSpec) sum() (string, error) {
	h := sha256.New()
	for _, f := range s.allFiles() {
		data, err := f.content()
		if err != nil {
			return "", err
		}
		fs := sha256.Sum256(data)
		fmt.Fprintf(h, "file %s %x\n", f.path, fs)
	}
	for _, l := range s.links {
		fmt.Fprintf(h, "link %s %s\n", l.path, l.target)
	}
	fmt.Fprintf(h, "env %q entrypoint %q user %q\n", s.env, s.entrypoint, s.user)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// buildImages writes each image as an archive that containerd imports
// (docker-archive layout, tagged) into dir, reusing an archive whose files
// did not change, and returns the archives' paths.
func buildImages(dir string, specs []imageSpec) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	var paths []string
	for _, s := range specs {
		sum, err := s.sum()
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", s.ref, err)
		}
		path := filepath.Join(dir, sum[:16]+"-"+filepath.Base(s.path)+".tar")
		if _, err := os.Stat(path); err != nil {
			if err := writeImage(path, s); err != nil {
				return nil, fmt.Errorf("image %s: %w", s.ref, err)
			}
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// writeImage builds the image of s and writes it to path.
func writeImage(path string, s imageSpec) error {
	raw, err := imageLayer(s)
	if err != nil {
		return err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Entrypoint: s.entrypoint, User: s.user, Env: append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, s.env...)}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tag, err := name.NewTag(s.ref)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// imageLayer returns the tar of s's files and links, each folder once
// before what it holds.
func imageLayer(s imageSpec) ([]byte, error) {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	dirs := map[string]bool{}
	mkdirs := func(p string) error {
		for _, d := range parentDirs(p) {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, f := range s.allFiles() {
		data, err := f.content()
		if err != nil {
			return nil, err
		}
		if err := mkdirs(f.path); err != nil {
			return nil, err
		}
		mode := int64(0o755)
		if f.data != nil {
			mode = 0o644
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.path[1:], Mode: mode, Size: int64(len(data))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	for _, l := range s.links {
		if err := mkdirs(l.path); err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: l.path[1:], Linkname: l.target, Mode: 0o777}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return layer.Bytes(), nil
}

// parentDirs returns "usr", "usr/local", "usr/local/bin" for
// "/usr/local/bin/x".
func parentDirs(p string) []string {
	var out []string
	for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
		out = append([]string{d[1:]}, out...)
	}
	return out
}

// buildStatic builds a command of this repository (e.g. ./cmd/stratus-ccm)
// into dir as the Dockerfile does: static, stripped, without the paths of
// this machine.
func buildStatic(ctx context.Context, repoRoot, pkg, dir string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", pkg, err, msg)
	}
	return out, nil
}

// checkStatic returns an error when a binary needs a dynamic loader, which
// the images (a binary alone) do not have.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; an image holds the binary alone (build it with CGO_ENABLED=0)", path)
		}
	}
	return nil
}

// realNodeImages are the images every real node gets: the sandbox, agnhost
// (with the shell and the tools the upstream e2e tests run in its pods), the
// manager's and the cluster DNS's.
func realNodeImages(pause, agnhost, proxyecho, manager, coredns string) ([]imageSpec, error) {
	tools, links, env, err := agnhostImageTools()
	if err != nil {
		return nil, err
	}
	return []imageSpec{
		{ref: pauseImage, bin: pause, path: "/pause", entrypoint: []string{"/pause"}, user: "65535:65535"},
		{ref: AgnhostImage, bin: agnhost, path: "/agnhost", files: tools, links: links, env: env, entrypoint: []string{"/agnhost"}},
		{ref: ProxyEchoImage, bin: proxyecho, path: "/proxyecho", entrypoint: []string{"/proxyecho"}, user: "65532:65532"},
		// As the Dockerfile builds it: the static binary at the same path,
		// running as distroless' nonroot user, which the chart expects.
		{ref: ManagerImageRepository + ":" + ManagerImageTag, bin: manager, path: "/usr/local/bin/stratus-ccm", entrypoint: []string{"/usr/local/bin/stratus-ccm"}, user: "65532:65532"},
		// As upstream's: the binary at /coredns, run as root (it binds port 53).
		{ref: CoreDNSImage, bin: coredns, path: "/coredns", entrypoint: []string{"/coredns"}},
	}, nil
}
