package devenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// checkExecutable reports why path is not an executable file.
func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}

// devKubeBins are the binaries of hack/kubebins the environment runs (kubectl
// for the commands it suggests). Only these are built: the others (helm, the
// upstream CCMs) are for tests and would add many minutes to a first run.
var devKubeBins = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"}

// kubeBins returns the folder of the control-plane binaries, building them
// (with progress on the terminal) the first time.
func (e *env) kubeBins(ctx context.Context) (string, error) {
	if e.opts.KubeBinDir != "" {
		return e.opts.KubeBinDir, nil
	}
	if e.opts.RepoRoot == "" {
		return "", errors.New("control-plane binaries: run from the stratus repository or pass --kube-bin-dir")
	}
	script := filepath.Join(e.opts.RepoRoot, "hack", "kubebins", "build.sh")
	names := devKubeBins
	if e.real != nil {
		names = append(slices.Clone(names), realNodeKubeBins...)
	}
	build := exec.CommandContext(ctx, script, names...)
	build.Dir = e.opts.RepoRoot
	build.Stdout, build.Stderr = e.out, e.out
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build control-plane binaries (%s): %w", script, err)
	}
	dir, err := exec.CommandContext(ctx, script, "--print-dir").Output()
	if err != nil {
		return "", fmt.Errorf("%s --print-dir: %w", script, err)
	}
	return strings.TrimSpace(string(dir)), nil
}

// managerBinary finds stratus-ccm: the option, next to this executable
// (make dev builds both into bin/), or built from the repository.
func (e *env) managerBinary(ctx context.Context) (string, error) {
	if e.opts.ManagerBinary != "" {
		return e.opts.ManagerBinary, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "stratus-ccm")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if e.opts.RepoRoot == "" {
		return "", errors.New("stratus-ccm not found next to stratus; pass --manager-binary or run from the repository")
	}
	out := filepath.Join(e.opts.StateDir, "bin", "stratus-ccm")
	e.say("building stratus-ccm into %s", out)
	build := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/stratus-ccm")
	build.Dir = e.opts.RepoRoot
	build.Stdout, build.Stderr = e.out, e.out
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build stratus-ccm: %w", err)
	}
	return out, nil
}
