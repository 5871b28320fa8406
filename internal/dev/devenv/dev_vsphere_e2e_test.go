package devenv

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/vcsim"
)

// TestDevVSphere runs `stratus dev --cloud vsphere` with the manager: the
// nodes of the simulated vCenter's VMs are initialized by the vSphere
// provider, a LoadBalancer Service answers through minicloud's VIP from
// both nodes, `stratus vcsim vm` drives the vCenter from another process
// with only the env file, a destroyed VM's node leaves the load balancer and
// is deleted, `stratus dev demo` tells its story, and `stratus dev
// vcsim stop|start` takes the vCenter down and back.
func TestDevVSphere(t *testing.T) {
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
	d := startDev(t, t.TempDir(), "--cloud", "vsphere", "--nodes", "2", "--manager-binary", manager, "--address-block", strconv.Itoa(blockVSphere))
	ctx := t.Context()
	cs := d.conn.Kube
	if d.conn.VCenter == nil {
		t.Fatal("Connect found no vCenter in the env file of stratus dev --cloud vsphere")
	}
	vms, err := d.conn.VCenter.VMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vms) != 2 {
		t.Fatalf("vCenter has %d VMs, want --nodes 2", len(vms))
	}

	// Every node initialized by vsphere: the VM's UUID in the provider ID,
	// the zone of its tag, its address, the system UUID its kubelet reported.
	for _, vm := range vms {
		ip, _ := vmIPv4(vm)
		testsupport.Eventually(t, 90*time.Second, "node "+vm.Name+" initialized by the vSphere provider", func(ctx context.Context) (bool, error) {
			n, err := cs.CoreV1().Nodes().Get(ctx, vm.Name, metav1.GetOptions{})
			return err == nil && Initialized(n) && n.Spec.ProviderID == "vsphere://"+vm.UUID &&
				n.Labels[corev1.LabelTopologyZone] == vm.Zone && n.Labels[corev1.LabelTopologyRegion] == vm.Region &&
				strings.EqualFold(n.Status.NodeInfo.SystemUUID, vm.UUID) &&
				hasAddress(n, corev1.NodeInternalIP, ip.String()), nil
		})
	}

	// The Service's VIP (minicloud) reaches both vSphere nodes' agents.
	svc := d.createLBService(ctx, "web")
	var vip string
	testsupport.Eventually(t, 90*time.Second, "ingress IP", func(ctx context.Context) (bool, error) {
		s, err := cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		vip = ingressOf(s)
		return vip != "", nil
	})
	seen := map[string]bool{}
	testsupport.Eventually(t, 60*time.Second, "the VIP answering from node-0 and node-1", func(ctx context.Context) (bool, error) {
		r, err := GetReply(ctx, "http://"+net.JoinHostPort(vip, "80")+"/")
		if err == nil && r.Service == "web" {
			seen[r.Node] = true
		}
		return seen["node-0"] && seen["node-1"], nil
	})

	// `stratus vcsim vm` reaches the vCenter with only the env file.
	vars, err := readEnvFile(filepath.Join(d.stateDir, EnvFile))
	if err != nil {
		t.Fatal(err)
	}
	vcsimCmd := func(args ...string) string {
		t.Helper()
		c := exec.CommandContext(ctx, d.bin, append([]string{"vcsim", "vm"}, args...)...)
		c.Env = append(os.Environ(), vcsim.StateDirEnv+"="+vars[vcsim.StateDirEnv])
		c.Dir = t.TempDir() // no .stratus/vcsim to fall back on
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("stratus vcsim vm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := vcsimCmd("list"); !strings.Contains(out, "node-0") || !strings.Contains(out, "node-1") {
		t.Errorf("stratus vcsim vm list:\n%s", out)
	}

	// node-1's VM is destroyed: its node leaves the load balancer and is
	// deleted; the VIP answers from node-0 alone. (One change at a time: the
	// demo below creates and destroys a VM of its own.)
	vcsimCmd("destroy", "node-1")
	lb := &demo{Conn: d.conn}
	testsupport.Eventually(t, 90*time.Second, "node-1 (10.0.0.2) out of the load balancer", func(ctx context.Context) (bool, error) {
		targets, err := lb.targets(ctx, svc)
		return err == nil && slices.Contains(targets, "10.0.0.1") && !slices.Contains(targets, "10.0.0.2"), nil
	})
	testsupport.Eventually(t, 3*time.Minute, "node-1 deleted", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	testsupport.Eventually(t, 30*time.Second, "the VIP answering from node-0 only", func(ctx context.Context) (bool, error) {
		for range 4 {
			r, err := GetReply(ctx, "http://"+net.JoinHostPort(vip, "80")+"/")
			if err != nil || r.Node != "node-0" {
				return false, nil
			}
		}
		return true, nil
	})

	// `stratus dev demo` tells the vSphere story on a VM of its own.
	demoCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(demoCtx, d.bin, "dev", "demo", "--state-dir", d.stateDir).CombinedOutput()
	for _, want := range []string{"vsphere://", "answered by node", "tainted node.cloudprovider.kubernetes.io/shutdown", "out of the load balancer", "deleted", "Done:"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("stratus dev demo output lacks %q", want)
		}
	}
	if err != nil || t.Failed() {
		t.Errorf("stratus dev demo: %v\n%s", err, out)
	}

	// A VM created from another terminal joins.
	vcsimCmd("create", "extra")
	testsupport.Eventually(t, 90*time.Second, "node extra initialized", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "extra", metav1.GetOptions{})
		return err == nil && Initialized(n) && strings.HasPrefix(n.Spec.ProviderID, "vsphere://"), nil
	})
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"extra", "node-0"}) {
		t.Errorf("nodes at the end: %v, want extra and node-0 (node-1 and the demo's destroyed)", names)
	}

	// The vCenter outage drill: stop refuses connections, start brings the
	// same VMs back on the same address.
	before, err := d.conn.VCenter.VMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	drill := func(action string) (string, error) {
		out, err := exec.CommandContext(ctx, d.bin, "dev", "vcsim", action, "--state-dir", d.stateDir).CombinedOutput()
		return string(out), err
	}
	if out, err := drill("stop"); err != nil || !strings.Contains(out, "vcsim stopped") {
		t.Fatalf("stratus dev vcsim stop: %v: %s", err, out)
	}
	if _, err := d.conn.VCenter.VMs(ctx); err == nil {
		t.Error("the vCenter answers after stratus dev vcsim stop")
	}
	if out, err := drill("stop"); err == nil || !strings.Contains(out, "not running") {
		t.Errorf("a second stratus dev vcsim stop: %v: %s", err, out)
	}
	d.waitOutput(30*time.Second, "vcsim stopped (stratus dev vcsim stop)")
	if out, err := drill("start"); err != nil || !strings.Contains(out, "vcsim started on") {
		t.Fatalf("stratus dev vcsim start: %v: %s", err, out)
	}
	after, err := d.conn.VCenter.VMs(ctx)
	if err != nil {
		t.Fatalf("the vCenter after stratus dev vcsim start: %v", err)
	}
	uuids := func(vms []vcsim.VM) []string {
		var out []string
		for _, vm := range vms {
			out = append(out, vm.Name+"="+vm.UUID)
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(uuids(before), uuids(after)) {
		t.Errorf("VMs after the outage %v, want the same as before %v", uuids(after), uuids(before))
	}
	// Ctrl-C leaves nothing running: checked by stop in the cleanup.
}
