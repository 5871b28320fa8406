package devenv

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
)

func TestAddressPools(t *testing.T) {
	for _, block := range []int{1, 200, 254} {
		inst, pub, vip := addressPools(block)
		for _, p := range []netip.Prefix{inst, pub, vip} {
			if b := p.Addr().As4(); b[0] != 127 || int(b[1]) != block {
				t.Errorf("block %d: pool %s outside 127.%d.0.0/16", block, p, block)
			}
		}
		if inst.Overlaps(pub) || inst.Overlaps(vip) || pub.Overlaps(vip) {
			t.Errorf("block %d: pools overlap: %s %s %s", block, inst, pub, vip)
		}
	}
}

func TestAddressBlock(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	derived, err := addressBlock(a, 0)
	if err != nil {
		t.Fatal(err)
	}
	if derived < firstDerivedBlock || derived > lastDerivedBlock {
		t.Errorf("derived block %d outside [%d, %d]", derived, firstDerivedBlock, lastDerivedBlock)
	}
	if again, _ := addressBlock(a, 0); again != derived {
		t.Errorf("restart: block %d, want the saved %d", again, derived)
	}
	if got, err := addressBlock(b, 249); err != nil || got != 249 {
		t.Errorf("explicit block: %d, %v", got, err)
	}
	if got, _ := addressBlock(b, 0); got != 249 {
		t.Errorf("restart after an explicit block: %d, want the saved 249", got)
	}
	for _, bad := range []int{-1, 255} {
		if _, err := addressBlock(t.TempDir(), bad); err == nil {
			t.Errorf("block %d accepted", bad)
		}
	}
}

func TestEnvFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), EnvFile)
	want := map[string]string{"KUBECONFIG": "/home/o'neil/my dir/kubeconfig", "MINICLOUD_URL": "http://127.0.0.1:1234", "MINICLOUD_TOKEN": "abc$def"}
	body := ""
	for _, k := range []string{"KUBECONFIG", "MINICLOUD_URL", "MINICLOUD_TOKEN"} {
		body += "export " + k + "=" + shellQuote(want[k]) + "\n"
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readEnvFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("readEnvFile (-want +got):\n%s", diff)
	}
}

func TestNodeChanges(t *testing.T) {
	ready := func(s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: s}
	}
	node := func(mut func(n *corev1.Node)) *corev1.Node {
		n := &corev1.Node{}
		n.Name = "node-1"
		n.Spec.Taints = []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Effect: corev1.TaintEffectNoSchedule}}
		n.Status.Conditions = []corev1.NodeCondition{ready(corev1.ConditionTrue)}
		if mut != nil {
			mut(n)
		}
		return n
	}
	initialized := func(n *corev1.Node) {
		n.Spec.Taints = nil
		n.Spec.ProviderID = "minicloud://i-1"
		n.Labels = map[string]string{corev1.LabelTopologyZone: "mc-central-a", corev1.LabelInstanceTypeStable: "mc.small"}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.200.0.1"}}
	}
	tests := []struct {
		name   string
		before *corev1.Node
		after  *corev1.Node
		want   []string
	}{
		{"nothing", node(nil), node(nil), nil},
		{"initialized", node(nil), node(initialized), []string{"node node-1 initialized: provider ID minicloud://i-1, zone mc-central-a, type mc.small, addresses InternalIP=127.200.0.1"}},
		{"pod CIDR", node(nil), node(func(n *corev1.Node) { n.Spec.PodCIDR = "10.244.1.0/24" }), []string{"node node-1: pod CIDR 10.244.1.0/24"}},
		{"not ready", node(nil), node(func(n *corev1.Node) { n.Status.Conditions = []corev1.NodeCondition{ready(corev1.ConditionUnknown)} }), []string{"node node-1: Ready=Unknown"}},
		{"route", node(nil), node(func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse})
		}), []string{"node node-1: pod network route in place (NetworkUnavailable=False)"}},
		{"shutdown taint", node(initialized), node(func(n *corev1.Node) {
			initialized(n)
			n.Spec.Taints = []corev1.Taint{{Key: cloudproviderapi.TaintNodeShutdown, Effect: corev1.TaintEffectNoSchedule}}
		}), []string{"node node-1: tainted node.cloudprovider.kubernetes.io/shutdown (its instance is shut down)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, nodeChanges(tt.before, tt.after)); diff != "" {
				t.Errorf("nodeChanges (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzEnvFileRoundTrip checks that any single-line value written to the env
// file (shell-quoted) reads back unchanged, and that reading arbitrary
// edited content never fails on its syntax. Seeds in testdata/fuzz.
func FuzzEnvFileRoundTrip(f *testing.F) {
	f.Fuzz(func(t *testing.T, v string) {
		if strings.ContainsAny(v, "\n\r") {
			t.Skip("the env file is line based")
		}
		dir := t.TempDir()
		path := filepath.Join(dir, EnvFile)
		if err := os.WriteFile(path, []byte("export MINICLOUD_TOKEN="+shellQuote(v)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := readEnvFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got["MINICLOUD_TOKEN"] != v {
			t.Errorf("round trip of %q gave %q", v, got["MINICLOUD_TOKEN"])
		}
		if err := os.WriteFile(path, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readEnvFile(path); err != nil {
			t.Errorf("reading %q: %v", v, err)
		}
	})
}

func TestNarrated(t *testing.T) {
	ev := func(kind, ns, name string) *corev1.Event {
		return &corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name}}
	}
	tests := []struct {
		ev   *corev1.Event
		want bool
	}{
		{ev("Node", "", "node-1"), true},
		{ev("Service", "default", "web"), true},
		{ev("Service", "default", "kubernetes"), false},
		{ev("Pod", "default", "p"), false},
	}
	for _, tt := range tests {
		if got := narrated(tt.ev); got != tt.want {
			t.Errorf("narrated(%s %s/%s) = %t, want %t", tt.ev.InvolvedObject.Kind, tt.ev.InvolvedObject.Namespace, tt.ev.InvolvedObject.Name, got, tt.want)
		}
	}
}

func TestLockStateDir(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockStateDir(dir); !errors.Is(err, ErrStateDirInUse) {
		t.Errorf("second lock: %v, want ErrStateDirInUse", err)
	}
	unlock()
	again, err := lockStateDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	again()
}

// A bad flag is an error naming it before anything starts: no control-plane
// process ran (none wrote a log or certificates) and nothing was narrated.
func TestBadFlagsStartNothing(t *testing.T) {
	bins, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkExecutable(filepath.Join(bins, "kube-controller-manager")); err != nil {
		t.Fatalf("control-plane binaries missing: run hack/kubebins/build.sh (%v)", err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	notExecutable := filepath.Join(t.TempDir(), "stratus-ccm")
	if err := os.WriteFile(notExecutable, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts Options
		flag string
	}{
		{"address block too big", Options{AddressBlock: 300}, "--address-block"},
		{"address block negative", Options{AddressBlock: -1}, "--address-block"},
		{"negative nodes", Options{Nodes: -1}, "--nodes"},
		{"unknown cloud", Options{Cloud: "aws"}, "--cloud"},
		{"privileged port base", Options{PortBase: 80}, "--port-base"},
		{"port base in use", Options{PortBase: min(busyPort, 65535-portCount)}, "--port-base"},
		{"kube bin dir without binaries", Options{KubeBinDir: t.TempDir()}, "--kube-bin-dir"},
		{"missing manager binary", Options{ManagerBinary: filepath.Join(t.TempDir(), "nope")}, "--manager-binary"},
		{"manager binary not executable", Options{ManagerBinary: notExecutable}, "--manager-binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			out := &strings.Builder{}
			opts := tc.opts
			opts.StateDir, opts.Out = state, out
			if opts.KubeBinDir == "" {
				opts.KubeBinDir = bins
			}
			err := Run(t.Context(), opts)
			if err == nil || !strings.Contains(err.Error(), tc.flag) {
				t.Fatalf("Run = %v, want an error naming %s", err, tc.flag)
			}
			for _, f := range []string{"logs/etcd.log", "logs/kube-apiserver.log", "logs/kube-controller-manager.log", "pki", "minicloud", "vcsim"} {
				if _, err := os.Stat(filepath.Join(state, f)); err == nil {
					t.Errorf("%s exists: something started before the flag was checked", f)
				}
			}
			if out.Len() > 0 {
				t.Errorf("output before the error: %s", out.String())
			}
		})
	}
}
