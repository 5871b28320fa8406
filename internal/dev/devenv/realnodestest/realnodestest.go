// Package realnodestest starts `stratus dev --real-nodes` from a test: real
// kubelets, containerd and kube-proxy in network namespaces, minicloud, and
// stratus-ccm from its Helm chart (or no manager), in the test's process,
// stopped when the test ends, with a check that nothing of the environment is
// left behind. It needs root and the Debian packages of
// hack/ci-packages.txt; it fails the test, naming what is missing, unless
// -short skips it.
package realnodestest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/stratus-ccm/stratus/internal/dev/devenv"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

// Options configure Start.
type Options struct {
	// Block is the environment's address block (127.B.0.0/16 for VIPs,
	// 172.31.B.0/24 for nodes, 10.B.0.0/16 for pods): each test package
	// takes its own, so that packages run side by side.
	Block int
	// Nodes is how many real nodes (default 2).
	Nodes int
	// NoManager starts everything but stratus-ccm (its flags are in
	// <StateDir>/manager.args).
	NoManager bool
}

// Env is a running real-node environment.
type Env struct {
	StateDir string
	Kube     kubernetes.Interface
	Cloud    *client.Client
	// Out is what the environment printed.
	Out *testsupport.LockedBuffer
}

// Start runs the environment until the test ends.
func Start(t *testing.T, o Options) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real kubelets, containerd and kube-proxy; skipped under -short")
	}
	if os.Geteuid() != 0 {
		t.Fatal("real nodes need root (network namespaces, cgroups, mounts); only -short skips this test")
	}
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bins, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	// The image the chart runs: stratus-ccm built as the Dockerfile does.
	manager := filepath.Join(t.TempDir(), "stratus-ccm")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", manager, "./cmd/stratus-ccm")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build stratus-ccm: %v\n%s", err, msg)
	}
	e := &Env{StateDir: t.TempDir(), Out: &testsupport.LockedBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- devenv.Run(ctx, devenv.Options{
			StateDir: e.StateDir, Nodes: o.Nodes, AddressBlock: o.Block, RealNodes: true, NoManager: o.NoManager,
			RepoRoot: root, KubeBinDir: bins, ManagerBinary: manager, Out: e.Out,
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stratus dev --real-nodes: %v", err)
		}
		if t.Failed() {
			t.Logf("stratus dev output:\n%s", e.Out.String())
			testsupport.DumpLogs(t, filepath.Join(e.StateDir, "logs"))
		}
		checkNothingLeft(t, o.Block)
	})
	err = wait.PollUntilContextTimeout(t.Context(), time.Second, 10*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-done:
			done <- err
			return false, fmt.Errorf("stratus dev --real-nodes ended before ready: %v", err)
		default:
		}
		return strings.Contains(e.Out.String(), devenv.ReadyLine), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := devenv.Connect(e.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	e.Kube, e.Cloud = conn.Kube, conn.Cloud
	return e
}

// checkNothingLeft fails when the environment left a namespace, link or
// cgroup of its own.
func checkNothingLeft(t *testing.T, block int) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Errorf("ip netns list: %v", err)
	}
	prefix := fmt.Sprintf("stratus-%d-", block)
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, prefix) {
			t.Errorf("network namespace left behind: %s", line)
		}
	}
	if err := exec.Command("ip", "link", "show", fmt.Sprintf("sr%d", block)).Run(); err == nil {
		t.Errorf("host link sr%d left behind", block)
	}
	for _, h := range []string{"pids", "memory", "cpu", "cpuset", "unified"} {
		matches, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", h, prefix+"*"))
		for _, m := range matches {
			t.Errorf("cgroup left behind: %s", m)
		}
	}
}
