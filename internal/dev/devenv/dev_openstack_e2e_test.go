package devenv

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

// TestDevOpenStack runs `stratus dev --cloud openstack` with the manager:
// the openstack provider, configured by the generated cloud.conf, initializes
// the nodes of minicloud's instances as Nova servers (openstack:/// provider
// IDs, zone, flavor, region), and `stratus dev demo` tells its story: a
// Service's external IP is a floating IP of the public pool that carries
// HTTP to a node, a stopped server's node gets the shutdown taint and a
// deleted one's node is removed. Routes are the dialect router's extra routes.
func TestDevOpenStack(t *testing.T) {
	t.Parallel()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		t.Skip("runs stratus dev; skipped under -short")
	}
	manager := os.Getenv("STRATUS_DEV_E2E_MANAGER")
	if manager == "" {
		manager = buildCommand(t, root, "cmd/stratus-ccm")
	}
	d := startDev(t, t.TempDir(), "--cloud", "openstack", "--nodes", "2", "--manager-binary", manager, "--address-block", strconv.Itoa(blockOpenStack))
	ctx := t.Context()
	if d.conn.Machines != CloudOpenStack {
		t.Errorf("Connect: machines %q, want %q", d.conn.Machines, CloudOpenStack)
	}

	// The generated cloud.conf holds the password (a minicloud token):
	// owner only.
	fi, err := os.Stat(filepath.Join(d.stateDir, "cloud.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("cloud.conf mode %v, want 0600", fi.Mode().Perm())
	}

	for _, name := range []string{"node-1", "node-2"} {
		in := d.instance(ctx, name)
		testsupport.Eventually(t, 90*time.Second, "node "+name+" initialized by the openstack provider", func(ctx context.Context) (bool, error) {
			n, err := d.conn.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			return err == nil && Initialized(n) && n.Spec.ProviderID == OpenStackProviderIDPrefix+in.ID &&
				n.Labels[corev1.LabelTopologyZone] == in.Zone && n.Labels[corev1.LabelInstanceTypeStable] == in.Type &&
				n.Labels[corev1.LabelTopologyRegion] == minicloud.Region &&
				hasAddress(n, corev1.NodeInternalIP, in.PrivateIP), nil
		})
	}

	// Routes: each node's pod CIDR an extra route of the dialect's router,
	// which minicloud carries as a route to the node's instance.
	testsupport.Eventually(t, 90*time.Second, "a route per node pod CIDR", func(ctx context.Context) (bool, error) {
		nodes, err := d.conn.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		routes, err := d.conn.Cloud.ListRoutes(ctx, client.ListOptions{})
		if err != nil {
			return false, nil
		}
		have := map[string]string{}
		for _, r := range routes {
			have[r.DestinationCIDR] = r.TargetInstanceID
		}
		for _, n := range nodes.Items {
			if n.Spec.PodCIDR == "" || have[n.Spec.PodCIDR] != d.instance(ctx, n.Name).ID {
				return false, nil
			}
		}
		return len(nodes.Items) > 0, nil
	})

	demoCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(demoCtx, d.bin, "dev", "demo", "--state-dir", d.stateDir).CombinedOutput()
	for _, want := range []string{"openstack:///", "Octavia", "answered by node", "tainted node.cloudprovider.kubernetes.io/shutdown", "deleted", "Done:"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("stratus dev demo output lacks %q", want)
		}
	}
	// The demo's external IP is a floating IP (the public pool), not the
	// VIP: the address the HTTP request went through.
	_, public, _ := addressPools(blockOpenStack)
	if m := regexp.MustCompile(`EXTERNAL-IP (\S+)`).FindSubmatch(out); m == nil {
		t.Error("stratus dev demo output names no EXTERNAL-IP")
	} else if a, err := netip.ParseAddr(string(m[1])); err != nil || !public.Contains(a) {
		t.Errorf("demo EXTERNAL-IP %s: not a floating IP of %s", m[1], public)
	}
	if err != nil || t.Failed() {
		t.Errorf("stratus dev demo: %v\n%s", err, out)
	}
}
