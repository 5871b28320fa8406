package bench

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
)

// createNodes creates an instance and a Node for each name.
func (e *env) createNodes(ctx context.Context, names []string) error {
	if err := e.createInstances(ctx, names); err != nil {
		return err
	}
	return e.registerNodes(ctx, names)
}

// createInstances creates a minicloud instance per name, 16 at a time, with
// the harness's unlimited token.
func (e *env) createInstances(ctx context.Context, names []string) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, name := range names {
		g.Go(func() error {
			inst, err := e.cloud.CreateInstance(ctx, api.InstanceCreate{Name: name, Type: "mc.small", Zone: minicloud.Zones[i%len(minicloud.Zones)]})
			if err != nil {
				return fmt.Errorf("create instance %s: %w", name, err)
			}
			e.mu.Lock()
			e.instances[name] = inst
			e.mu.Unlock()
			return nil
		})
	}
	return g.Wait()
}

// createInitializedNodes creates an instance and a Node per name, the Node
// already initialized as a cloud node controller leaves it (provider ID,
// instance-type and topology labels, addresses, no uninitialized taint): a
// cluster whose manager starts, or restarts, on nodes that joined long ago.
func (e *env) createInitializedNodes(ctx context.Context, names []string) error {
	if err := e.createInstances(ctx, names); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, name := range names {
		g.Go(func() error {
			e.mu.Lock()
			inst := e.instances[name]
			e.mu.Unlock()
			n := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
					corev1.LabelHostname:                name,
					corev1.LabelInstanceTypeStable:      inst.Type,
					corev1.LabelInstanceType:            inst.Type,
					corev1.LabelTopologyZone:            inst.Zone,
					corev1.LabelFailureDomainBetaZone:   inst.Zone,
					corev1.LabelTopologyRegion:          inst.Region,
					corev1.LabelFailureDomainBetaRegion: inst.Region,
				}},
				Spec: corev1.NodeSpec{ProviderID: e.providerID(inst.ID)},
			}
			if _, err := e.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create node %s: %w", name, err)
			}
			now := metav1.Now()
			n.Status = corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}},
				Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: inst.PrivateIP}, {Type: corev1.NodeHostName, Address: name}},
			}
			if inst.PublicIP != "" {
				n.Status.Addresses = slices.Insert(n.Status.Addresses, 1, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: inst.PublicIP})
			}
			if _, err := e.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("node %s status: %w", name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// heartbeat acts as the nodes' kubelets for d: each Node's status is
// reported (its Ready condition's heartbeat time) once every period, as
// kubelet does when nothing changes (--node-status-report-frequency, 5
// minutes by default), the reports spread evenly over the period. It
// returns how many reports it made.
func (e *env) heartbeat(ctx context.Context, names []string, period, d time.Duration) (int, error) {
	if len(names) == 0 {
		return 0, nil
	}
	// The window only stops new reports; those under way finish with ctx.
	window, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(period / time.Duration(len(names)))
	defer tick.Stop()
	// Reports go out on schedule even when the API server is slow: up to 16
	// at once (a slow report must not hold back the others, as kubelets are
	// independent).
	var (
		g    errgroup.Group
		sent atomic.Int64
	)
	g.SetLimit(16)
	for i := 0; window.Err() == nil; i++ {
		select {
		case <-window.Done():
			continue
		case <-tick.C:
		}
		name := names[i%len(names)]
		g.Go(func() error {
			now := time.Now().UTC().Format(time.RFC3339)
			patch := fmt.Appendf(nil, `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":%q}]}}`, now)
			_, err := e.kube.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
			if err != nil {
				return fmt.Errorf("heartbeat of node %s: %w", name, err)
			}
			sent.Add(1)
			return nil
		})
	}
	err := g.Wait()
	return int(sent.Load()), err
}

// registerNodes registers a Node per name (as kubelet with
// --cloud-provider=external does), 32 at a time: a burst of joining nodes.
func (e *env) registerNodes(ctx context.Context, names []string) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, name := range names {
		g.Go(func() error { return e.registerNode(ctx, name) })
	}
	return g.Wait()
}

func (e *env) registerNode(ctx context.Context, name string) error {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	}
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	// The manager may write the Node between create and status: retry on
	// conflicts as a kubelet does.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := e.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		if e.vms != nil {
			cur.Status.NodeInfo.SystemUUID = e.vmUUID(name)
		}
		cur.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
		if len(cur.Status.Addresses) == 0 {
			cur.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}}
		}
		_, err = e.kube.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("node %s status: %w", name, err)
	}
	return nil
}

// waitInitialized waits until want Nodes have no uninitialized taint.
func (e *env) waitInitialized(ctx context.Context, want int) error {
	return e.until(ctx, fmt.Sprintf("%d nodes initialized", want), func(ctx context.Context) (bool, error) {
		nodes, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		n := 0
		for _, node := range nodes.Items {
			if node.Spec.ProviderID != "" && !hasTaint(&node, cloudproviderapi.TaintExternalCloudProvider) {
				n++
			}
		}
		return n >= want, nil
	})
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
