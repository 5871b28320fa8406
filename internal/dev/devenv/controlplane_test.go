package devenv

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
)

// startControlPlane starts a dev control plane with kube-controller-manager in
// a temporary folder and stops it when the test ends.
func startControlPlane(t *testing.T) (*ControlPlane, kubernetes.Interface) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane; skipped under -short")
	}
	bins, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	ports, err := FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	cp := &ControlPlane{Dir: t.TempDir(), BinDir: bins, Ports: ports, ControllerManager: true}
	if err := cp.Start(t.Context()); err != nil {
		t.Fatalf("start control plane (build the binaries with hack/kubebins/build.sh): %v", err)
	}
	t.Cleanup(func() {
		cp.Stop(context.Background())
		if t.Failed() {
			testsupport.DumpLogs(t, cp.LogDir())
		}
	})
	cfg, err := cp.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cp, cs
}

func TestControlPlaneAllocatesPodCIDRsAndStopsCleanly(t *testing.T) {
	t.Parallel()
	cp, cs := startControlPlane(t)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- (&Kubelet{Name: "node-a", IP: testIP(), Client: cs}).Run(ctx) }()

	// Node IPAM in kube-controller-manager gives the node a pod CIDR from the
	// cluster CIDR. (Node lifecycle marking silent nodes NotReady is checked
	// by TestDevClusterAndKubelets.)
	var node *corev1.Node
	testsupport.Eventually(t, 60*time.Second, "pod CIDR allocated and node Ready", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = n
		return n.Spec.PodCIDR != "" && isReady(n), nil
	})
	if _, cidr, err := net.ParseCIDR(ClusterCIDR); err != nil || !cidr.Contains(net.ParseIP(strings.Split(node.Spec.PodCIDR, "/")[0])) {
		t.Errorf("pod CIDR = %s, want one from %s", node.Spec.PodCIDR, ClusterCIDR)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("kubelet: %v", err)
	}

	// Stop leaves no process behind.
	pids := cp.Pids()
	if len(pids) != 3 {
		t.Fatalf("running components = %d, want etcd, kube-apiserver and kube-controller-manager", len(pids))
	}
	cp.Stop(context.Background())
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after Stop (kill -0: %v)", pid, err)
		}
	}
}
