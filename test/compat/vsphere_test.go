package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"sigs.k8s.io/yaml"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
	_ "github.com/stratus-ccm/stratus/providers/vsphere" // registers "vsphere" in the stratus child process
	"github.com/stratus-ccm/stratus/vcsim"
)

// stratusCPV is the third side of vSphere scenarios: stratus-ccm's
// controllers with the upstream vSphere provider compiled in (hack/kubebins
// "stratus-cpv"). upstream is then the upstream CCM with the upstream
// provider ("vsphere-ccm"), and stratus is stratus-ccm with its own
// providers/vsphere.
const stratusCPV side = "stratus-cpv"

// vsphereSides are the managers of a vSphere scenario, the reference first.
var vsphereSides = []side{upstream, stratusCPV, stratus}

// vsphereBuildCommand builds the two upstream vSphere binaries.
const vsphereBuildCommand = "make kubebins-vsphere"

// vsphereBinaries returns the paths of vsphere-ccm and stratus-cpv, failing
// the test with the command that builds them when one is missing.
func vsphereBinaries(t *testing.T) map[side]string {
	t.Helper()
	dir, err := testenv.BinDir()
	if err != nil {
		t.Fatalf("find kubebins: %v", err)
	}
	bins := map[side]string{upstream: filepath.Join(dir, "vsphere-ccm"), stratusCPV: filepath.Join(dir, "stratus-cpv")}
	for _, bin := range bins {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s not found: the vSphere scenarios need the upstream vSphere provider's builds; run `%s` (about 15 minutes with a cold Go build cache)", bin, vsphereBuildCommand)
		}
	}
	return bins
}

// vsphereVMs is the inventory of every vSphere scenario: node-0 on the
// cluster DC0_C0 (zone-a), node-1 on the standalone host DC0_H0 (zone-b),
// both in region-1.
const vsphereVMs = 2

// TestVSphereParity runs every vSphere scenario three times on the same
// simulated inventory (a fresh vCenter simulator and control plane each
// time): the upstream CCM with the upstream vSphere provider, stratus-ccm
// with the upstream provider, and stratus-ccm with providers/vsphere. Both
// stratus runs must end in the upstream run's state, up to the differences
// docs/differences.md lists.
func TestVSphereParity(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real control plane and the upstream vSphere builds; skipped under -short")
	}
	bins := vsphereBinaries(t)
	for _, sc := range vsphereScenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			compareSides(t, vsphereSides, func(t *testing.T, s side) any {
				r := startVSphereRun(t, s, bins[s], sc)
				sc.run(r)
				snap, names := r.takeSnapshot(sc.events)
				for _, tol := range append(tolerances, vsphereTolerances...) {
					tol.apply(&snap)
				}
				got := normalize(snap, names)
				if testing.Verbose() {
					js, _ := json.MarshalIndent(got, "", "  ")
					t.Logf("final state (normalized):\n%s", js)
				}
				return got
			}, func(got []any) {
				for i := 1; i < len(vsphereSides); i++ {
					if d := cmp.Diff(got[0], got[i]); d != "" {
						t.Errorf("%s differs from the upstream vSphere CCM in ways docs/differences.md does not list (-upstream +%s):\n%s", vsphereSides[i], vsphereSides[i], d)
					}
				}
			})
		})
	}
}

// startVSphereRun starts a control plane, a simulated vCenter with the
// scenario inventory and the side's manager (bin for the upstream builds),
// all stopped when the (sub)test ends.
func startVSphereRun(t *testing.T, s side, bin string, sc scenario) *run {
	t.Helper()
	env, err := testenv.Start()
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	t.Cleanup(env.Stop)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	vc, err := vcsim.Start(ctx, vcsim.Options{VMs: vsphereVMs, IPv6: sc.vsphereDualStack})
	if err != nil {
		t.Fatalf("vCenter simulator: %v", err)
	}
	t.Cleanup(vc.Close)
	r := &run{t: t, ctx: ctx, side: s, kube: env.Clientset(t), vc: vc, settle: settleTimeout}
	if sc.settle > 0 {
		r.settle = sc.settle
	}

	kubeconfig := managertest.WriteKubeconfig(t, env.Config)
	cloudConfig := filepath.Join(t.TempDir(), "vsphere.yaml")
	if err := os.WriteFile(cloudConfig, vsphereCloudConfig(t, vc, sc), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--cloud-provider=vsphere", "--cloud-config=" + cloudConfig,
		"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false", "--use-service-account-credentials=false", "--secure-port=0",
		"--cluster-name=compat", "--node-monitor-period=1s", "--configure-cloud-routes=false",
	}
	// Deliberate difference node-deletion-guard, as in startRun.
	stratusArgs := append(slices.Clone(args), "--node-deletion-grace-period=2s")
	var upstreamEnv []string
	if sc.vsphereDualStack {
		// The upstream provider refuses two IP families without it.
		upstreamEnv = append(upstreamEnv, "ENABLE_ALPHA_DUAL_STACK=1")
	}
	switch s {
	case upstream:
		startUpstream(t, bin, args, upstreamEnv...)
	case stratusCPV:
		startUpstream(t, bin, stratusArgs, upstreamEnv...)
	case stratus:
		managertest.StartProcess(t, stratusArgs...)
	}
	return r
}

// vsphereCloudConfig is the simulator's cloud config (upstream's YAML),
// with ipFamily [ipv4, ipv6] for a dual-stack scenario.
func vsphereCloudConfig(t *testing.T, vc *vcsim.Server, sc scenario) []byte {
	t.Helper()
	raw := vc.CloudConfig(vcsim.TrustCAFile)
	if !sc.vsphereDualStack {
		return raw
	}
	var cfg map[string]map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("parse the simulator's cloud config: %v", err)
	}
	cfg["global"]["ipFamily"] = []string{"ipv4", "ipv6"}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// joinVM registers a Node for the VM name as kubelet --cloud-provider=external
// on it does: named after the VM (its guest hostname), with the VM's
// systemUUID, then changed by mutate (another name, a provider ID). The
// upstream provider finds a Node's VM only by that UUID, when its node
// informer first sees the Node.
func (r *run) joinVM(name string, o nodeOptions, mutate ...func(*corev1.Node)) {
	r.t.Helper()
	vm, err := r.vc.VM(r.ctx, name)
	if err != nil {
		r.t.Fatal(err)
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{SystemUUID: systemUUID(vm.UUID)}},
	}
	for _, m := range mutate {
		m(n)
	}
	n.Labels[corev1.LabelHostname] = n.Name
	r.register(n, o)
}

// setGuest changes what the VM's guest tools report, failing the test on
// an error.
func (r *run) setGuest(name string, g vcsim.Guest) {
	r.t.Helper()
	if err := r.vc.SetGuest(r.ctx, name, g); err != nil {
		r.t.Fatal(err)
	}
}

// systemUUID is the UUID a Linux guest reads from SMBIOS for the BIOS UUID
// vSphere reports, as the kubelet publishes it: the first three groups are
// little-endian there, so their bytes are reversed. (Written out here, not
// taken from providers/vsphere, so that the test does not share the
// conversion it checks.)
func systemUUID(bios string) string {
	g := strings.Split(bios, "-")
	if len(g) != 5 {
		panic("not a UUID: " + bios)
	}
	for _, i := range []int{0, 1, 2} {
		var b strings.Builder
		for j := len(g[i]) - 2; j >= 0; j -= 2 {
			b.WriteString(g[i][j : j+2])
		}
		g[i] = b.String()
	}
	return strings.Join(g, "-")
}

// vmNodes joins every VM of the inventory as a Node and waits until all are
// initialized.
func (r *run) vmNodes(o nodeOptions) {
	r.t.Helper()
	for _, name := range r.vc.Nodes() {
		r.joinVM(name, o)
	}
	for _, name := range r.vc.Nodes() {
		r.waitNode(name, "initialized", initialized)
	}
}

// vsphereNames maps the simulated VMs' UUIDs and IPs to their names.
func (r *run) vsphereNames() map[string]string {
	r.t.Helper()
	vms, err := r.vc.VMs(r.ctx)
	if err != nil {
		r.t.Fatalf("list VMs: %v", err)
	}
	m := map[string]string{}
	for _, vm := range vms {
		m[vm.UUID] = "<uuid " + vm.Name + ">"
		m[systemUUID(vm.UUID)] = "<system-uuid " + vm.Name + ">"
		// The first guest IP is "<ip node-0>", further ones are numbered
		// in guest.net order, so that the snapshot says which was chosen.
		i := 0
		for _, nic := range vm.Guest.NICs {
			for _, ip := range nic.IPs {
				if i == 0 {
					m[ip] = "<ip " + vm.Name + ">"
				} else {
					m[ip] = fmt.Sprintf("<ip%d %s>", i+1, vm.Name)
				}
				i++
			}
		}
	}
	return m
}

// vsphereTolerances are applied to both sides of every vSphere scenario,
// besides tolerances.
var vsphereTolerances = []tolerance{
	{ID: "node-address-order", apply: func(s *snapshot) {
		// Group the addresses by type, in the order each type first
		// appears, keeping the order within a type: what upstream's
		// strategic merge patch makes of the provider's list.
		for i := range s.Nodes {
			addrs := s.Nodes[i].Addresses
			first := map[string]int{}
			for j, a := range addrs {
				typ, _, _ := strings.Cut(a, "=")
				if _, ok := first[typ]; !ok {
					first[typ] = j
				}
			}
			slices.SortStableFunc(addrs, func(a, b string) int {
				ta, _, _ := strings.Cut(a, "=")
				tb, _, _ := strings.Cut(b, "=")
				return first[ta] - first[tb]
			})
		}
	}},
}

// vsphereScenarios run against the upstream vSphere CCM, stratus with the
// upstream provider and stratus with its own, on vsphereVMs VMs.
var vsphereScenarios = []scenario{
	{
		name:        "vsphere-node-init",
		differences: []string{"node-addresses-first"},
		run: func(r *run) {
			r.vmNodes(nodeOptions{})
		},
	},
	{
		// The guest's hostname is a FQDN, and the kubelet names its Node
		// after it.
		name:        "vsphere-node-init-fqdn",
		differences: []string{"node-addresses-first"},
		run: func(r *run) {
			r.setGuest("node-0", vcsim.Guest{Hostname: "node-0.example.com", NICs: []vcsim.NIC{{Network: vcsim.DefaultNetwork, IPs: []string{vcsim.NodeIPv4(0)}}}})
			r.joinVM("node-0", nodeOptions{}, func(n *corev1.Node) { n.Name = "node-0.example.com" })
			r.waitNode("node-0.example.com", "initialized", initialized)
		},
	},
	{
		// The kubelet was given --provider-id.
		name: "vsphere-node-init-provider-id",
		run: func(r *run) {
			vm, err := r.vc.VM(r.ctx, "node-1")
			if err != nil {
				r.t.Fatal(err)
			}
			r.joinVM("node-1", nodeOptions{}, func(n *corev1.Node) { n.Spec.ProviderID = "vsphere://" + vm.UUID })
			r.waitNode("node-1", "initialized", initialized)
		},
	},
	{
		// Two NICs, the first with two IPv4 addresses and an IPv6 one:
		// which become the InternalIP and the ExternalIP.
		name:        "vsphere-node-init-several-ips",
		differences: []string{"node-addresses-first"},
		run: func(r *run) {
			r.setGuest("node-0", vcsim.Guest{Hostname: "node-0", NICs: []vcsim.NIC{
				{Network: vcsim.DefaultNetwork, IPs: []string{vcsim.NodeIPv4(0), "10.99.0.10", "fd00::10"}},
				{Network: vcsim.DefaultNetwork, IPs: []string{"10.98.0.10"}},
			}})
			r.joinVM("node-0", nodeOptions{})
			r.waitNode("node-0", "initialized", initialized)
		},
	},
	{
		name:             "vsphere-node-init-dual-stack",
		differences:      []string{"node-addresses-first"},
		vsphereDualStack: true,
		run: func(r *run) {
			r.vmNodes(nodeOptions{})
		},
	},
	{
		name: "vsphere-node-shutdown",
		run: func(r *run) {
			r.vmNodes(nodeOptions{notReady: true})
			if err := r.vc.PowerOff(r.ctx, "node-0"); err != nil {
				r.t.Fatal(err)
			}
			r.waitNode("node-0", "shutdown taint", hasTaint(cloudproviderapi.TaintNodeShutdown))
		},
	},
	{
		// The guest shuts down (not a power-off), then the VM is powered
		// on again: the shutdown taint stays until the kubelet reports
		// Ready (upstream removes it only from a Ready Node).
		name: "vsphere-node-guest-shutdown-restart",
		run: func(r *run) {
			r.vmNodes(nodeOptions{notReady: true})
			if err := r.vc.ShutdownGuest(r.ctx, "node-1"); err != nil {
				r.t.Fatal(err)
			}
			r.waitNode("node-1", "shutdown taint", hasTaint(cloudproviderapi.TaintNodeShutdown))
			if err := r.vc.PowerOn(r.ctx, "node-1"); err != nil {
				r.t.Fatal(err)
			}
			// Five node-monitor periods.
			r.nodeStays("node-1", "shutdown taint kept while NotReady", 5*time.Second, hasTaint(cloudproviderapi.TaintNodeShutdown))
			if err := r.setReady("node-1", true); err != nil {
				r.t.Fatal(err)
			}
			r.waitNode("node-1", "shutdown taint removed", func(n *corev1.Node) bool { return !hasTaint(cloudproviderapi.TaintNodeShutdown)(n) })
		},
	},
	{
		name:        "vsphere-node-gone-deleted",
		events:      []string{"Node/node-0: Normal DeletingNode"},
		differences: []string{"node-deletion-guard"},
		// stratus confirms "gone" twice, 30s apart, before it deletes.
		settle: 2 * time.Minute,
		run: func(r *run) {
			// Two nodes: stratus deletes nothing on an empty instance listing.
			r.vmNodes(nodeOptions{})
			if err := r.setReady("node-0", false); err != nil {
				r.t.Fatal(err)
			}
			if err := r.vc.Destroy(r.ctx, "node-0"); err != nil {
				r.t.Fatal(err)
			}
			r.waitFor("node-0 deleted", func(ctx context.Context) (bool, error) {
				_, err := r.kube.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
		},
	},
}
