package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/controller/node/nodetest"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
)

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	testenv.Main(m)
}

const uninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// start runs the cloud node controller for clouds.
func start(t *testing.T, clouds *cloud.Set, opts Options) *nodetest.Harness {
	t.Helper()
	return nodetest.Start(t, nodetest.Config{}, func(mgr manager.Manager) (bool, error) { return Add(mgr, clouds, opts) })
}

func single(raw cloudprovider.Interface) *cloud.Set {
	return cloud.Single(cloud.NewProvider("test", raw))
}

func initialized(h *nodetest.Harness, name string) func() bool {
	return func() bool {
		n := h.Node(name)
		return n != nil && !nodetest.HasTaint(n, uninitialized)
	}
}

// upstream behaviors B1, B5, B6 and B7: one initialization writes provider ID, the six
// instance-type/topology labels, the filtered additional labels and the merged
// addresses, removes only the uninitialized taint, and emits Synced.
func TestInitializeV2(t *testing.T) {
	c := nodetest.NewCloud("test")
	c.AddInstance("n1", cloudprovider.InstanceMetadata{
		InstanceType:  "large",
		Zone:          "z1",
		Region:        "r1",
		NodeAddresses: []v1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.2"), external("1.2.3.4")},
		AdditionalLabels: map[string]string{
			"example.com/rack": "r7", "kubernetes.io/evil": "x", "sub.k8s.io/evil": "x", "example.com/team": "cloud",
		},
	})
	c.AddInstance("keep-id", cloudprovider.InstanceMetadata{ProviderID: "test://other", NodeAddresses: []v1.NodeAddress{internal("10.0.1.1")}})
	h := start(t, single(c), Options{})

	h.CreateNode("n1", nodetest.Uninitialized,
		nodetest.Tainted("example.com/dedicated", "gpu", v1.TaintEffectNoExecute),
		nodetest.WithLabels("example.com/team", "user"),
		nodetest.WithAnnotation(ProvidedNodeIPAnnotation, "10.0.0.2"),
		nodetest.WithAddresses(hostname("n1-kubelet"), internal("10.0.0.2")))
	h.CreateNode("keep-id", nodetest.Uninitialized, nodetest.WithProviderID("test://keep-id-original"))
	h.Eventually(20*time.Second, "n1 initialized", initialized(h, "n1"))

	n := h.Node("n1")
	if n.Spec.ProviderID != "test://n1" {
		t.Errorf("providerID = %q", n.Spec.ProviderID)
	}
	wantLabels := map[string]string{
		"node.kubernetes.io/instance-type": "large", "beta.kubernetes.io/instance-type": "large",
		"topology.kubernetes.io/zone": "z1", "failure-domain.beta.kubernetes.io/zone": "z1",
		"topology.kubernetes.io/region": "r1", "failure-domain.beta.kubernetes.io/region": "r1",
		"example.com/rack": "r7", "example.com/team": "user",
	}
	for k, v := range wantLabels {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	for _, k := range []string{"kubernetes.io/evil", "sub.k8s.io/evil"} {
		if _, ok := n.Labels[k]; ok {
			t.Errorf("reserved label %s applied", k)
		}
	}
	// The API server's admission adds node.kubernetes.io/not-ready; both stay.
	if want := []v1.Taint{{Key: "example.com/dedicated", Value: "gpu", Effect: v1.TaintEffectNoExecute}, {Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule}}; !cmp.Equal(n.Spec.Taints, want) {
		t.Errorf("taints = %v, want %v", n.Spec.Taints, want)
	}
	// provided-node-ip keeps one InternalIP, first; the kubelet hostname is kept.
	if want := []v1.NodeAddress{internal("10.0.0.2"), external("1.2.3.4"), hostname("n1-kubelet")}; !cmp.Equal(n.Status.Addresses, want) {
		t.Errorf("addresses = %v, want %v", n.Status.Addresses, want)
	}
	h.Eventually(10*time.Second, "Synced event", func() bool { return len(h.Events("n1", ReasonSynced)) == 1 })
	if ev := h.Events("n1", ReasonSynced)[0]; ev.Type != v1.EventTypeNormal || ev.Source.Component != Component || ev.InvolvedObject.APIVersion != "v1" {
		t.Errorf("Synced event = %+v", ev)
	}

	for _, hist := range []prometheus.Histogram{taintRemovalDelay, initialSyncDelay} {
		m := &dto.Metric{}
		if err := hist.Write(m); err != nil || m.GetHistogram().GetSampleCount() == 0 {
			t.Errorf("histogram %v has no sample (%v)", hist.Desc(), err)
		}
	}

	h.Eventually(20*time.Second, "keep-id initialized", initialized(h, "keep-id"))
	if got := h.Node("keep-id").Spec.ProviderID; got != "test://keep-id-original" {
		t.Errorf("existing providerID overwritten: %q", got)
	}
}

// byNameOnly is a v1 provider (Instances + Zones) whose by-provider-ID lookups
// fail, so that initialization must fall back to the by-name calls.
type byNameOnly struct{ *fake.Cloud }

func (c *byNameOnly) Instances() (cloudprovider.Instances, bool) { return c, true }
func (c *byNameOnly) Zones() (cloudprovider.Zones, bool)         { return c, true }
func (c *byNameOnly) NodeAddressesByProviderID(_ context.Context, _ string) ([]v1.NodeAddress, error) {
	return nil, errors.New("by provider ID unavailable")
}
func (c *byNameOnly) InstanceTypeByProviderID(_ context.Context, _ string) (string, error) {
	return "", errors.New("by provider ID unavailable")
}
func (c *byNameOnly) GetZoneByProviderID(_ context.Context, _ string) (cloudprovider.Zone, error) {
	return cloudprovider.Zone{}, errors.New("by provider ID unavailable")
}

// upstream behavior B2: Instances (v1) + Zones, with the by-name fallbacks.
func TestInitializeV1Zones(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  cloudprovider.Interface
	}{
		{"by provider ID", &fake.Cloud{}},
		{"fallback by name", &byNameOnly{&fake.Cloud{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f *fake.Cloud
			switch raw := tc.raw.(type) {
			case *fake.Cloud:
				f = raw
			case *byNameOnly:
				f = raw.Cloud
			}
			// Fixed before the controller starts: fake.Cloud is not safe to change
			// while it is being called.
			f.Provider = "fake"
			f.ExtID = map[types.NodeName]string{"v1-node": "i-123"}
			f.InstanceTypes = map[types.NodeName]string{"v1-node": "m5", "fake://i-123": "m5"}
			f.Addresses = []v1.NodeAddress{internal("10.1.0.1"), hostname("v1-node.cloud")}
			f.Zone = cloudprovider.Zone{FailureDomain: "zone-a", Region: "region-1"}
			h := start(t, cloud.Single(cloud.NewProvider("fake", tc.raw)), Options{})
			h.CreateNode("v1-node", nodetest.Uninitialized)
			h.Eventually(20*time.Second, "v1-node initialized", initialized(h, "v1-node"))
			n := h.Node("v1-node")
			if n.Spec.ProviderID != "fake://i-123" {
				t.Errorf("providerID = %q", n.Spec.ProviderID)
			}
			for k, v := range map[string]string{
				"node.kubernetes.io/instance-type": "m5", "beta.kubernetes.io/instance-type": "m5",
				"topology.kubernetes.io/zone": "zone-a", "failure-domain.beta.kubernetes.io/zone": "zone-a",
				"topology.kubernetes.io/region": "region-1", "failure-domain.beta.kubernetes.io/region": "region-1",
			} {
				if n.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
				}
			}
			if want := f.Addresses; !cmp.Equal(n.Status.Addresses, want) {
				t.Errorf("addresses = %v, want %v", n.Status.Addresses, want)
			}
		})
	}
}

// upstream behavior B9 (v1 part): a v1 provider returning NotImplemented for the
// provider ID initializes the node without one.
func TestInitializeV1ProviderIDNotImplemented(t *testing.T) {
	f := &fake.Cloud{
		Provider:      "fake",
		DisableZones:  true,
		ExtIDErr:      map[types.NodeName]error{"noid": cloudprovider.NotImplemented},
		InstanceTypes: map[types.NodeName]string{"noid": "small"},
		Addresses:     []v1.NodeAddress{internal("10.2.0.1")},
	}
	h := start(t, cloud.Single(cloud.NewProvider("fake", f)), Options{})
	h.CreateNode("noid", nodetest.Uninitialized)
	h.Eventually(20*time.Second, "noid initialized", initialized(h, "noid"))
	if n := h.Node("noid"); n.Spec.ProviderID != "" || n.Labels["node.kubernetes.io/instance-type"] != "small" {
		t.Errorf("node = providerID %q labels %v", n.Spec.ProviderID, n.Labels)
	}
}

// upstream behavior B3: a metadata error, a missing provider ID and a provided
// node IP the cloud does not know keep the taint, emit a Warning event, and the
// node is retried until it succeeds.
func TestInitializationFailuresRetry(t *testing.T) {
	for i, tc := range []struct {
		name  string
		setup func(c *nodetest.Cloud, name string)
		node  []func(*v1.Node)
		fix   func(c *nodetest.Cloud, name string)
	}{
		{
			name:  "metadata error",
			setup: func(c *nodetest.Cloud, _ string) { c.SetMetadataError(errors.New("cloud API down")) },
			fix:   func(c *nodetest.Cloud, _ string) { c.SetMetadataError(nil) },
		},
		{
			name: "missing provider ID",
			setup: func(c *nodetest.Cloud, name string) {
				c.SetMetadata(name, cloudprovider.InstanceMetadata{NodeAddresses: []v1.NodeAddress{internal("10.0.0.1")}})
			},
			fix: func(c *nodetest.Cloud, name string) {
				c.SetMetadata(name, cloudprovider.InstanceMetadata{ProviderID: c.ProviderID(name), NodeAddresses: []v1.NodeAddress{internal("10.0.0.1")}})
			},
		},
		{
			name: "provided node IP unknown to the cloud",
			node: []func(*v1.Node){nodetest.WithAnnotation(ProvidedNodeIPAnnotation, "10.9.9.9")},
			fix: func(c *nodetest.Cloud, name string) {
				c.AddInstance(name, cloudprovider.InstanceMetadata{NodeAddresses: []v1.NodeAddress{internal("10.0.0.1"), internal("10.9.9.9")}})
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("fail-%d", i)
			c := nodetest.NewCloud("test")
			c.AddInstance(name, cloudprovider.InstanceMetadata{NodeAddresses: []v1.NodeAddress{internal("10.0.0.1")}})
			if tc.setup != nil {
				tc.setup(c, name)
			}
			h := start(t, single(c), Options{})
			h.CreateNode(name, append([]func(*v1.Node){nodetest.Uninitialized}, tc.node...)...)
			h.Eventually(20*time.Second, "InitializationFailed event", func() bool {
				return len(h.Events(name, ReasonInitializationFailed)) > 0
			})
			if ev := h.Events(name, ReasonInitializationFailed)[0]; ev.Type != v1.EventTypeWarning {
				t.Errorf("event type = %s", ev.Type)
			}
			h.Eventually(5*time.Second, "a retry", func() bool { return c.Calls("InstanceMetadata") >= 2 })
			if n := h.Node(name); !nodetest.HasTaint(n, uninitialized) || len(h.Events(name, ReasonSynced)) > 0 {
				t.Fatalf("failed node lost its taint or was reported synced: %v", n.Spec.Taints)
			}
			tc.fix(c, name)
			h.Eventually(30*time.Second, "initialized after the fix", initialized(h, name))
			if n := h.Node(name); n.Spec.ProviderID != c.ProviderID(name) {
				t.Errorf("providerID = %q", n.Spec.ProviderID)
			}
		})
	}
}

// A permanent initialization error (a provided node IP the cloud does not
// have) is retried with a per-Node backoff that doubles up to its cap, and
// each failure records one InitializationFailed event, aggregated into one
// Event object by the recorder.
func TestInitializationBackoff(t *testing.T) {
	const base, maxDelay = 200 * time.Millisecond, 800 * time.Millisecond
	c := nodetest.NewCloud("test")
	name := "backoff"
	c.AddInstance(name, cloudprovider.InstanceMetadata{NodeAddresses: []v1.NodeAddress{internal("10.0.0.1")}})
	h := start(t, single(c), Options{RetryBaseDelay: base, RetryMaxDelay: maxDelay})
	h.CreateNode(name, nodetest.Uninitialized, nodetest.WithAnnotation(ProvidedNodeIPAnnotation, "10.9.9.9"))

	const attempts = 6
	key := "InstanceMetadata/" + name
	h.Eventually(30*time.Second, fmt.Sprintf("%d attempts", attempts), func() bool { return len(c.CallTimes(key)) >= attempts })
	times := c.CallTimes(key)[:attempts]
	// A retry is never due before its delay: base, doubled per failure, capped.
	want := base
	for i := 1; i < attempts; i++ {
		if gap := times[i].Sub(times[i-1]); gap < want {
			t.Errorf("attempt %d came %v after attempt %d, before its backoff of %v", i+1, gap, i, want)
		}
		want = min(2*want, maxDelay)
	}
	// One event per failure, no more: the recorder folds them into one Event
	// whose count is the number of failures.
	failures := func() (objects, count int) {
		evs := h.Events(name, ReasonInitializationFailed)
		for _, ev := range evs {
			count += int(max(ev.Count, 1))
		}
		return len(evs), count
	}
	h.Eventually(10*time.Second, "the events of the failures", func() bool {
		_, n := failures()
		return n >= attempts
	})
	calls := c.Calls(key)
	if objects, count := failures(); objects != 1 || count > calls {
		t.Errorf("%d InitializationFailed Event objects counting %d failures after %d attempts; want 1 object and at most one failure per attempt", objects, count, calls)
	}
	if n := h.Node(name); !nodetest.HasTaint(n, uninitialized) {
		t.Fatalf("node lost its taint: %v", n.Spec.Taints)
	}
}

// With the default options, the first retry of a failed initialization waits
// DefaultRetryBaseDelay (seconds), not the work queue's milliseconds.
func TestInitializationBackoffDefault(t *testing.T) {
	c := nodetest.NewCloud("test")
	name := "backoff-default"
	c.AddInstance(name, cloudprovider.InstanceMetadata{NodeAddresses: []v1.NodeAddress{internal("10.0.0.1")}})
	h := start(t, single(c), Options{})
	h.CreateNode(name, nodetest.Uninitialized, nodetest.WithAnnotation(ProvidedNodeIPAnnotation, "10.9.9.9"))
	key := "InstanceMetadata/" + name
	h.Eventually(30*time.Second, "a retry", func() bool { return len(c.CallTimes(key)) >= 2 })
	times := c.CallTimes(key)
	if gap := times[1].Sub(times[0]); gap < DefaultRetryBaseDelay {
		t.Errorf("first retry came %v after the failure, want at least %v", gap, DefaultRetryBaseDelay)
	}
}

// The default backoff keeps a permanent error to a handful of attempts (each
// one InitializationFailed event) per minute: at most six in the first
// minute, then one per RetryMaxDelay.
func TestDefaultBackoffSchedule(t *testing.T) {
	opts, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	rl := rateLimiter(opts)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: "n"}}
	var elapsed time.Duration
	perMinute := map[int]int{}
	for elapsed < time.Hour {
		perMinute[int(elapsed/time.Minute)]++ // an attempt, failing
		elapsed += rl.When(req)
	}
	for minute, n := range perMinute {
		if n > 6 {
			t.Errorf("minute %d: %d attempts of a failing node, want at most 6", minute, n)
		}
	}
	if got := rl.When(req); got != DefaultRetryMaxDelay {
		t.Errorf("steady-state delay %v, want %v", got, DefaultRetryMaxDelay)
	}
	for _, bad := range []Options{{RetryBaseDelay: -time.Second}, {RetryMaxDelay: -time.Second}, {RetryBaseDelay: time.Minute, RetryMaxDelay: time.Second}} {
		if _, err := bad.withDefaults(); err == nil || !strings.Contains(err.Error(), "RetryMaxDelay") && !strings.Contains(err.Error(), "RetryBaseDelay") {
			t.Errorf("options %+v: error %v, want one naming the field", bad, err)
		}
	}
}

// upstream behavior B4: nil metadata leaves the node alone and is not retried.
func TestNilMetadata(t *testing.T) {
	c := nodetest.NewCloud("test")
	c.SetNilMetadata(true)
	h := start(t, single(c), Options{})
	created := h.CreateNode("n", nodetest.Uninitialized)
	h.Eventually(10*time.Second, "metadata asked", func() bool { return c.Calls("InstanceMetadata") == 1 })
	h.Consistently(time.Second, "no write and no retry", func() bool {
		return h.Node("n").ResourceVersion == created.ResourceVersion && c.Calls("InstanceMetadata") == 1
	})
}

// A node whose provider ID names a provider that is not configured is never read
// from a cloud nor written, tainted or not.
func TestForeignNodeUntouched(t *testing.T) {
	c := nodetest.NewCloud("test").Listing()
	h := start(t, single(c), Options{StatusUpdateFrequency: 100 * time.Millisecond})
	foreign := h.CreateNode("foreign", nodetest.Uninitialized, nodetest.WithProviderID("vsphere://abc"),
		nodetest.WithLabels("failure-domain.beta.kubernetes.io/zone", "z-beta"))
	foreign2 := h.CreateNode("foreign-init", nodetest.WithProviderID("vsphere://def"),
		nodetest.WithLabels("failure-domain.beta.kubernetes.io/zone", "z-beta"), nodetest.WithAddresses(internal("192.168.0.1")))
	// A node of ours, to know the controller is running.
	c.AddInstance("ours", cloudprovider.InstanceMetadata{NodeAddresses: []v1.NodeAddress{internal("10.0.0.1")}})
	h.CreateNode("ours", nodetest.Uninitialized)
	h.Eventually(20*time.Second, "ours initialized", initialized(h, "ours"))
	calls := c.Calls("InstanceMetadata")
	h.Consistently(time.Second, "foreign nodes untouched", func() bool {
		return h.Node("foreign").ResourceVersion == foreign.ResourceVersion &&
			h.Node("foreign-init").ResourceVersion == foreign2.ResourceVersion &&
			c.Calls("InstanceMetadata") == calls
	})
}

// upstream behavior B9 and the deliberate difference: GA labels lead, beta
// labels follow, without cloud calls.
func TestLabelRepair(t *testing.T) {
	c := nodetest.NewCloud("test")
	h := start(t, single(c), Options{StatusUpdateFrequency: time.Hour})
	h.CreateNode("n", nodetest.WithProviderID("test://n"),
		nodetest.WithLabels("topology.kubernetes.io/zone", "z1", "failure-domain.beta.kubernetes.io/zone", "z1"))
	// The address refresh's first pass asks once; label repair never does.
	h.Eventually(10*time.Second, "first refresh pass", func() bool { return c.Calls("InstanceMetadata") == 1 })
	h.UpdateNode("n", func(n *v1.Node) { n.Labels["topology.kubernetes.io/zone"] = "z2" })
	h.Eventually(10*time.Second, "beta zone follows GA", func() bool {
		n := h.Node("n")
		return n.Labels["failure-domain.beta.kubernetes.io/zone"] == "z2" && n.Labels["topology.kubernetes.io/zone"] == "z2"
	})
	h.UpdateNode("n", func(n *v1.Node) { n.Labels["beta.kubernetes.io/instance-type"] = "old-only-beta" })
	h.Eventually(10*time.Second, "GA instance type filled from beta", func() bool {
		return h.Node("n").Labels["node.kubernetes.io/instance-type"] == "old-only-beta"
	})
	if n := c.TotalCalls(); n != 1 {
		t.Errorf("label repair made %d cloud calls", n-1)
	}
}

// upstream behaviors B7 and B8 with the deliberate difference: the periodic
// refresh rewrites addresses that changed (replace semantics, exact ordered
// comparison), keeps them when the cloud reports none, skips tainted nodes, and
// costs one listing per pass when the provider can list.
func TestRefresh(t *testing.T) {
	for _, tc := range []struct {
		name    string
		listing bool
	}{{"per node", false}, {"listing", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := nodetest.NewCloud("test")
			clouds := single(c)
			if tc.listing {
				// Every pass lists: with the default freshness the passes
				// would be answered by one cached listing.
				clouds = cloud.Single(cloud.NewProvider("test", c.Listing(), cloud.WithInstanceCacheFreshness(0)))
			}
			c.AddInstance("a", cloudprovider.InstanceMetadata{NodeAddresses: []v1.NodeAddress{internal("10.0.0.1"), external("1.1.1.1")}})
			c.AddInstance("b", cloudprovider.InstanceMetadata{NodeAddresses: nil})
			h := start(t, clouds, Options{StatusUpdateFrequency: 200 * time.Millisecond, Workers: 1})
			h.CreateNode("a", nodetest.WithProviderID("test://a"), nodetest.WithAddresses(internal("10.0.0.9"), internal("10.0.0.8"), hostname("a")))
			h.CreateNode("b", nodetest.WithProviderID("test://b"), nodetest.WithAddresses(internal("10.0.0.2")))
			// The cloud has no instance for it: initialization keeps failing.
			h.CreateNode("tainted", nodetest.Uninitialized, nodetest.WithProviderID("test://elsewhere"), nodetest.WithAddresses(internal("10.0.0.7")))

			h.Eventually(10*time.Second, "a's addresses replaced", func() bool {
				return cmp.Equal(h.Node("a").Status.Addresses, []v1.NodeAddress{internal("10.0.0.1"), external("1.1.1.1"), hostname("a")})
			})
			// Reordering across types is a change.
			c.AddInstance("a", cloudprovider.InstanceMetadata{NodeAddresses: []v1.NodeAddress{external("1.1.1.1"), internal("10.0.0.1")}})
			h.Eventually(10*time.Second, "a's reordered addresses", func() bool {
				return cmp.Equal(h.Node("a").Status.Addresses, []v1.NodeAddress{external("1.1.1.1"), internal("10.0.0.1"), hostname("a")})
			})
			a := h.Node("a")
			listings := c.Calls("ListInstances")
			h.Eventually(10*time.Second, "two more passes", func() bool {
				return c.Calls("ListInstances") >= listings+2 || (!tc.listing && c.Calls("InstanceMetadata") > 6)
			})
			if got := h.Node("a"); got.ResourceVersion != a.ResourceVersion {
				t.Errorf("unchanged addresses were rewritten")
			}
			if got := h.Node("b").Status.Addresses; !cmp.Equal(got, []v1.NodeAddress{internal("10.0.0.2")}) {
				t.Errorf("empty cloud list changed b's addresses to %v", got)
			}
			if got := h.Node("tainted").Status.Addresses; !cmp.Equal(got, []v1.NodeAddress{internal("10.0.0.7")}) {
				t.Errorf("tainted node's addresses refreshed to %v", got)
			}
			if tc.listing {
				// With a listing, the refresh never asks about a node on its own.
				if got := c.Calls("InstanceMetadata/a") + c.Calls("InstanceMetadata/b"); got != 0 {
					t.Errorf("%d per-node metadata calls despite the listing", got)
				}
			}
		})
	}
}

// Add rejects worker counts below 0 (0 means the default) and does not start
// without an instances-capable provider.
func TestAddOptions(t *testing.T) {
	env := testenv.Get(t)
	mgr, err := manager.New(env.Config, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	c := nodetest.NewCloud("test")
	if _, err := Add(mgr, single(c), Options{Workers: -1}); err == nil {
		t.Error("Workers -1 accepted")
	}
	started, err := Add(mgr, single(&fake.Cloud{DisableInstances: true}), Options{})
	if started || err != nil {
		t.Errorf("Add without instances = %v, %v; want not started", started, err)
	}
}

// The refresh of an Instances (v1) provider asks for addresses only, by provider
// ID, falling back to the node name.
func TestRefreshV1(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  func(*fake.Cloud) cloudprovider.Interface
	}{
		{"by provider ID", func(f *fake.Cloud) cloudprovider.Interface { return f }},
		{"fallback by name", func(f *fake.Cloud) cloudprovider.Interface { return &byNameOnly{f} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fake.Cloud{Provider: "fake", Addresses: []v1.NodeAddress{internal("10.3.0.1"), hostname("v1-refresh")}}
			h := start(t, cloud.Single(cloud.NewProvider("fake", tc.raw(f))), Options{StatusUpdateFrequency: 100 * time.Millisecond})
			h.CreateNode("v1-refresh", nodetest.WithProviderID("fake://i-1"), nodetest.WithAddresses(internal("10.3.0.9")))
			h.Eventually(10*time.Second, "addresses refreshed", func() bool {
				return cmp.Equal(h.Node("v1-refresh").Status.Addresses, f.Addresses)
			})
		})
	}
}

// An initialization that writes addresses and then the taint removal makes no
// request the API server refuses: the second patch starts from the first one's
// answer instead of the stale cached version (which cost a 409 and a re-read per
// node), and is conditional on the taint list, not on the version that
// kubelet's first status write changes.
func TestInitializeWithoutConflicts(t *testing.T) {
	c := nodetest.NewCloud("test")
	h := start(t, single(c), Options{})
	conflicts := func() float64 {
		mfs, err := metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0.0
		for _, mf := range mfs {
			if mf.GetName() != "rest_client_requests_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "code" && l.GetValue() == "409" {
						n += m.GetCounter().GetValue()
					}
				}
			}
		}
		return n
	}
	before := conflicts()
	for i := range 5 {
		name := fmt.Sprintf("noconflict-%d", i)
		c.AddInstance(name, cloudprovider.InstanceMetadata{NodeAddresses: []v1.NodeAddress{internal(fmt.Sprintf("10.0.9.%d", i+1))}})
		// The status write right after the create is kubelet's first one,
		// which can race the controller's writes as in a cluster (the
		// patch package's tests make that race certain).
		h.CreateNode(name, nodetest.Uninitialized, func(n *v1.Node) {
			n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
		})
	}
	for i := range 5 {
		h.Eventually(20*time.Second, "initialized", initialized(h, fmt.Sprintf("noconflict-%d", i)))
	}
	if got := conflicts() - before; got != 0 {
		t.Errorf("%v requests answered 409 Conflict while initializing 5 nodes, want 0", got)
	}
}
