package patch_test

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stratus-ccm/stratus/internal/controller/patch"
	"github.com/stratus-ccm/stratus/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// node creates a Node named after the test and returns it as read.
func node(t *testing.T, c client.Client) *v1.Node {
	t.Helper()
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "patch-" + testenv.Get(t).Namespace(t)}}
	if err := c.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), n) })
	return n
}

func kube(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(testenv.Get(t).Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func taint(key string) v1.Taint { return v1.Taint{Key: key, Effect: v1.TaintEffectNoSchedule} }

// A Locked change computed from a stale version conflicts, is applied again
// to a fresh read, and keeps the taint another writer added meanwhile.
func TestLockedRetriesFromAFreshRead(t *testing.T) {
	c := kube(t)
	stale := node(t, c)
	other := stale.DeepCopy()
	other.Spec.Taints = []v1.Taint{taint("other")}
	if err := c.Update(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	calls := 0
	got, err := patch.Apply(context.Background(), c, c, stale, patch.Options{}, func(n *v1.Node) {
		calls++
		n.Spec.Taints = append(n.Spec.Taints, taint("mine"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("mutate called %d times; want 2 (the stale version, then the fresh one)", calls)
	}
	want := []v1.Taint{taint("other"), taint("mine")}
	var server v1.Node
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(stale), &server); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*v1.Node{got, &server} {
		if len(n.Spec.Taints) != 2 || n.Spec.Taints[0].Key != "other" || n.Spec.Taints[1].Key != "mine" {
			t.Errorf("taints %v; want %v", n.Spec.Taints, want)
		}
	}
}

// A Merge change of labels from a stale version does not conflict and
// leaves the labels another writer set; the answer has no label the server
// does not have.
func TestMergeKeepsOtherWritersFields(t *testing.T) {
	c := kube(t)
	stale := node(t, c)
	stale.Labels = map[string]string{"gone": "x"} // as a lagging cache might
	other := &v1.Node{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(stale), other); err != nil {
		t.Fatal(err)
	}
	other.Labels = map[string]string{"theirs": "1"}
	if err := c.Update(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	got, err := patch.Apply(context.Background(), c, nil, stale, patch.Options{Kind: patch.Merge}, func(n *v1.Node) {
		n.Labels["mine"] = "2"
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Labels) != 2 || got.Labels["theirs"] != "1" || got.Labels["mine"] != "2" {
		t.Errorf("labels %v; want theirs=1 and mine=2 only", got.Labels)
	}
}

// A Strategic status change of one condition keeps the others.
func TestStrategicMergesConditionsByType(t *testing.T) {
	c := kube(t)
	n := node(t, c)
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	if err := c.Status().Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	stale := n.DeepCopy()
	stale.Status.Conditions = nil // a version that has not seen Ready
	got, err := patch.Apply(context.Background(), c, nil, stale, patch.Options{Kind: patch.Strategic, Status: true}, func(n *v1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionFalse})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 2 {
		t.Errorf("conditions %+v; want Ready kept and NetworkUnavailable added", got.Status.Conditions)
	}
}

// No change, no write: the object comes back as given.
func TestNoChangeNoWrite(t *testing.T) {
	c := kube(t)
	n := node(t, c)
	got, err := patch.Apply(context.Background(), c, nil, n, patch.Options{}, func(*v1.Node) {})
	if err != nil || got != n {
		t.Errorf("Apply of no change = %p, %v; want the same object %p, no error", got, err, n)
	}
}
