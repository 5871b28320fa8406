package compat

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stratus-ccm/stratus/minicloud/api"
)

// world is one run's random values: what normalize must hide.
type world struct {
	instID, ip, vip string
	uid             types.UID
}

func (w world) snapshot(zone string, nodeEvents []string, conditions ...string) (snapshot, map[string]string) {
	lbName := ("a" + strings.ReplaceAll(string(w.uid), "-", ""))[:32] // upstream's default name
	s := snapshot{
		Nodes: []nodeState{{Name: "node-a", Labels: map[string]string{corev1.LabelTopologyZone: zone}, ProviderID: "minicloud://" + w.instID, Addresses: []string{"InternalIP=" + w.ip, "Hostname=node-a"}}},
		Services: []serviceState{{Name: "web", UID: string(w.uid), Finalizers: []string{"service.kubernetes.io/load-balancer-cleanup"},
			Ingress: []string{"ip=" + w.vip + " hostname= mode=VIP ports=80/TCP"}, Conditions: conditions}},
		LoadBalancers: []lbState{{Name: lbName, VIP: w.vip, Tags: map[string]string{"stratus/service-uid": string(w.uid)}, Targets: []string{w.instID}}},
		Events: map[string][]string{
			"Node/node-a": append([]string{"Normal Synced (cloud-node-controller)"}, nodeEvents...),
			"Service/web": {"Normal EnsuredLoadBalancer (service-controller)"},
		},
	}
	names := namesOf(
		[]api.Instance{{ID: w.instID, Name: "node-a", PrivateIP: w.ip}},
		[]api.LoadBalancer{{Name: lbName, VIP: w.vip}},
		[]corev1.Service{serviceWithUID("web", w.uid)},
	)
	return s, names
}

func serviceWithUID(name string, uid types.UID) corev1.Service {
	svc := corev1.Service{}
	svc.Name, svc.UID = name, uid
	return svc
}

// TestComparisonHidesOnlyRandomValuesAndListedDifferences proves the
// comparison can fail: random IDs, IPs and UIDs and the listed differences
// compare equal, anything else does not.
func TestComparisonHidesOnlyRandomValuesAndListedDifferences(t *testing.T) {
	up := world{instID: "i-000000000001", ip: "127.10.1.5", vip: "127.100.3.1", uid: "0a1b2c3d-1111-2222-3333-444455556666"}
	st := world{instID: "i-000000000007", ip: "127.11.9.5", vip: "127.150.8.1", uid: "9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff"}
	for _, tc := range []struct {
		name      string
		upZone    string
		stZone    string
		stConds   []string
		stEvents  []string
		wantEqual bool
	}{
		{name: "same meaning, different random values", upZone: "z1", stZone: "z1", wantEqual: true},
		{name: "listed difference lb-ready-condition", upZone: "z1", stZone: "z1", stConds: []string{"LoadBalancerReady=True/Ready"}, wantEqual: true},
		{name: "unlisted difference: a label", upZone: "z1", stZone: "z2", wantEqual: false},
		{name: "unlisted difference: another condition", upZone: "z1", stZone: "z1", stConds: []string{"Other=True/X"}, wantEqual: false},
		{name: "listed difference node-events", upZone: "z1", stZone: "z1", stEvents: []string{"Warning NodeDeletionBlocked (cloud-node-lifecycle-controller)"}, wantEqual: true},
		{name: "unlisted difference: another event", upZone: "z1", stZone: "z1", stEvents: []string{"Warning DeletingNodeFailed (cloud-node-lifecycle-controller)"}, wantEqual: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, an := up.snapshot(tc.upZone, nil)
			b, bn := st.snapshot(tc.stZone, tc.stEvents, tc.stConds...)
			for _, tol := range tolerances {
				tol.apply(&a)
				tol.apply(&b)
			}
			d := cmp.Diff(normalize(a, an), normalize(b, bn))
			if got := d == ""; got != tc.wantEqual {
				t.Errorf("equal = %v, want %v; diff:\n%s", got, tc.wantEqual, d)
			}
		})
	}
}

// TestAddressOrderTolerance shows that node-address-order hides only the
// grouping of address types: stratus's interleaved dual-stack list becomes
// upstream's, a list that differs in the first address of a type does not.
func TestAddressOrderTolerance(t *testing.T) {
	apply := func(addrs ...string) []string {
		s := snapshot{Nodes: []nodeState{{Name: "node-0", Addresses: addrs}}}
		for _, tol := range vsphereTolerances {
			if tol.ID == "node-address-order" {
				tol.apply(&s)
			}
		}
		return s.Nodes[0].Addresses
	}
	upstream := apply("Hostname=node-0", "InternalIP=10.0.0.1", "InternalIP=fd00::1", "ExternalIP=10.0.0.1", "ExternalIP=fd00::1")
	stratus := apply("Hostname=node-0", "InternalIP=10.0.0.1", "ExternalIP=10.0.0.1", "InternalIP=fd00::1", "ExternalIP=fd00::1")
	if d := cmp.Diff(upstream, stratus); d != "" {
		t.Errorf("the same addresses grouped differently still differ (-upstream +stratus):\n%s", d)
	}
	swapped := apply("Hostname=node-0", "InternalIP=fd00::1", "ExternalIP=10.0.0.1", "InternalIP=10.0.0.1", "ExternalIP=fd00::1")
	if cmp.Equal(upstream, swapped) {
		t.Errorf("a list whose first InternalIP differs became equal to upstream's: %v", swapped)
	}
}
