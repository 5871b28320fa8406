package patch_test

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stratus-ccm/stratus/internal/controller/patch"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
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

// counted wraps a mutate function and counts its calls: one call is one
// attempt, so two mean a re-read.
func counted(calls *int, mutate func(*v1.Node)) func(*v1.Node) {
	return func(n *v1.Node) { *calls++; mutate(n) }
}

func serverNode(t *testing.T, c client.Client, n *v1.Node) *v1.Node {
	t.Helper()
	var got v1.Node
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(n), &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

// A Tested change from a version an unrelated write (a status update, as
// kubelet's first one of a joining node) made stale goes through at the first
// attempt and keeps that write, where a Locked one would conflict.
func TestTestedIgnoresUnrelatedWrites(t *testing.T) {
	c := kube(t)
	stale := node(t, c)
	stale.Spec.Taints = []v1.Taint{taint("uninitialized"), taint("keep")}
	stale.Labels = map[string]string{"kubernetes.io/hostname": "x"}
	if err := c.Update(context.Background(), stale); err != nil {
		t.Fatal(err)
	}
	other := stale.DeepCopy()
	other.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	if err := c.Status().Update(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	calls := 0
	got, err := patch.Apply(context.Background(), c, c, stale, patch.Options{Kind: patch.Tested}, counted(&calls, func(n *v1.Node) {
		n.Spec.Taints = n.Spec.Taints[1:]
		n.Spec.ProviderID = "minicloud://x"
		n.Labels["topology.kubernetes.io/zone"] = "a"
	}))
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("mutate called %d times; want 1 (no re-read)", calls)
	}
	for _, n := range []*v1.Node{got, serverNode(t, c, stale)} {
		if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "keep" || n.Spec.ProviderID != "minicloud://x" || n.Labels["topology.kubernetes.io/zone"] != "a" {
			t.Errorf("taints %v, provider ID %q, labels %v; want keep only, minicloud://x, the zone label", n.Spec.Taints, n.Spec.ProviderID, n.Labels)
		}
		if len(n.Status.Conditions) != 1 {
			t.Errorf("conditions %+v; want the other writer's Ready kept", n.Status.Conditions)
		}
	}
	// The same change as Locked conflicts: the test above measures the
	// difference, not a server that never conflicts.
	_, err = patch.Apply(context.Background(), c, c, stale, patch.Options{Backoff: &wait.Backoff{Steps: 1}}, func(n *v1.Node) {
		n.Spec.ProviderID = "minicloud://y"
	})
	if !apierrors.IsConflict(err) {
		t.Errorf("Locked from the stale version: %v; want a conflict", err)
	}
}

// A Tested change whose list another writer changed meanwhile fails its test,
// is applied again to a fresh read, and keeps that writer's taint.
func TestTestedRetriesWhenTheListChanged(t *testing.T) {
	c := kube(t)
	stale := node(t, c)
	stale.Spec.Taints = []v1.Taint{taint("uninitialized")}
	if err := c.Update(context.Background(), stale); err != nil {
		t.Fatal(err)
	}
	other := stale.DeepCopy()
	other.Spec.Taints = append(other.Spec.Taints, taint("theirs"))
	if err := c.Update(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	calls := 0
	_, err := patch.Apply(context.Background(), c, c, stale, patch.Options{Kind: patch.Tested}, counted(&calls, func(n *v1.Node) {
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == "uninitialized" })
	}))
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("mutate called %d times; want 2 (the stale version, then the fresh one)", calls)
	}
	if got := serverNode(t, c, stale).Spec.Taints; len(got) != 1 || got[0].Key != "theirs" {
		t.Errorf("taints %v; want theirs only", got)
	}
}

// A Tested change that adds a list the read version lacks cannot test its
// absence: it is sent as Locked, conflicts and keeps the other writer's taint.
func TestTestedAddingAListIsLocked(t *testing.T) {
	c := kube(t)
	stale := node(t, c)
	other := stale.DeepCopy()
	other.Spec.Taints = []v1.Taint{taint("theirs")}
	if err := c.Update(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	calls := 0
	_, err := patch.Apply(context.Background(), c, c, stale, patch.Options{Kind: patch.Tested}, counted(&calls, func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, taint("mine"))
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := serverNode(t, c, stale).Spec.Taints; calls != 2 || len(got) != 2 {
		t.Errorf("mutate called %d times, taints %v; want 2 calls and theirs and mine", calls, got)
	}
}

// A Tested change the API server refuses for itself (not for a failed test)
// is returned as the refusal after one fresh read, not retried.
func TestTestedInvalidChangeIsReturned(t *testing.T) {
	c := kube(t)
	stale := node(t, c)
	stale.Spec.Taints = []v1.Taint{taint("a")}
	if err := c.Update(context.Background(), stale); err != nil {
		t.Fatal(err)
	}
	calls := 0
	_, err := patch.Apply(context.Background(), c, c, stale, patch.Options{Kind: patch.Tested}, counted(&calls, func(n *v1.Node) {
		n.Spec.Taints = []v1.Taint{{Key: "a", Effect: "NotAnEffect"}}
	}))
	if !apierrors.IsInvalid(err) || calls != 1 {
		t.Errorf("Apply = %v after %d attempts; want the API server's Invalid after 1", err, calls)
	}
}
