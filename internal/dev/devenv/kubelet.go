package devenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Kubelet defaults, as a real kubelet has them.
const (
	// HeartbeatPeriod is how often the node Lease is renewed and the Ready
	// condition refreshed (kubelet's nodeStatusUpdateFrequency).
	HeartbeatPeriod = 10 * time.Second
	// StatusReportPeriod is how often the node status is posted when
	// nothing in it changed (kubelet's nodeStatusReportFrequency): between
	// reports the Lease alone is the heartbeat, as it is for the node
	// lifecycle controller.
	StatusReportPeriod = 5 * time.Minute
	// leaseDurationSeconds is kubelet's nodeLeaseDurationSeconds.
	leaseDurationSeconds = 40
	// KubeletVersion is what simulated kubelets report.
	KubeletVersion = "v1.37.2"
	// nodeLeaseNamespace holds the node heartbeats.
	nodeLeaseNamespace = corev1.NamespaceNodeLease
)

// Kubelet is a simulated kubelet for one machine. Run registers its Node as a
// kubelet with --cloud-provider=external and --node-ip does, keeps it Ready
// with heartbeats until its context is done (the machine stopped), and
// answers on the NodePorts of LoadBalancer Services at IP.
type Kubelet struct {
	// Name is the node name (the machine's hostname).
	Name string
	// IP is the machine's private IP: the node IP the kubelet was given,
	// and where the NodePort responder listens unless ListenIP is set.
	IP string
	// ListenIP, if set, is where the NodePort responder listens instead of
	// IP: the loopback counterpart of a machine whose address is on another
	// cloud's network (a vSphere VM's), where load balancers reach it.
	ListenIP string
	// SystemUUID is the machine's BIOS UUID, reported in the node's
	// status.nodeInfo.systemUUID as kubelet reads it from the firmware
	// (providers such as vSphere find the machine by it).
	SystemUUID string
	// Client talks to the API server.
	Client kubernetes.Interface
	// Ports, if set, answers the NodePorts for this kubelet (at ListenIP,
	// or IP) instead of listeners of its own; it must be running.
	Ports *NodePorts
}

// Run registers the node (an existing Node is kept, as a restarted kubelet
// keeps it), then heartbeats and serves NodePorts until ctx is done.
func (k *Kubelet) Run(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("node", k.Name))
	if err := k.register(ctx); err != nil {
		return err
	}
	listen := k.IP
	if k.ListenIP != "" {
		listen = k.ListenIP
	}
	hb := &heartbeater{k: k}
	if k.Ports != nil {
		remove := k.Ports.add(listen, k.Name)
		defer remove()
		wait.UntilWithContext(ctx, hb.beat, HeartbeatPeriod)
		return nil
	}
	node := k.Name
	r := &responder{name: "node " + node, ip: listen, client: k.Client,
		nodeAt: func(net.Addr) (string, bool) { return node, true }}
	errc := make(chan error, 1)
	go func() { errc <- r.run(ctx) }()
	wait.UntilWithContext(ctx, hb.beat, HeartbeatPeriod)
	return <-errc
}

// register creates the Node. Like a kubelet, it treats an existing Node as
// already registered.
func (k *Kubelet) register(ctx context.Context) error {
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 8, Cap: 5 * time.Second}, func(ctx context.Context) (bool, error) {
		_, err := k.Client.CoreV1().Nodes().Create(ctx, k.node(), metav1.CreateOptions{})
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
			return true, nil
		case ctx.Err() != nil:
			return false, ctx.Err()
		default:
			log.FromContext(ctx).Info("registering node failed; retrying", "error", err.Error())
			return false, nil
		}
	})
	if err != nil {
		return fmt.Errorf("register node %s: %w", k.Name, err)
	}
	return nil
}

// node is the Node a kubelet with --cloud-provider=external --node-ip=IP
// creates: the uninitialized taint that the cloud node controller removes,
// the provided-node-ip hint, the node IP and hostname as addresses (the cloud
// replaces them), and the kubelet's capacity.
func (k *Kubelet) node() *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("2"),
		corev1.ResourceMemory:           resource.MustParse("4Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
	}
	now := metav1.Now()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: k.Name,
			Labels: map[string]string{
				corev1.LabelHostname:      k.Name,
				corev1.LabelOSStable:      "linux",
				corev1.LabelArchStable:    runtime.GOARCH,
				"beta.kubernetes.io/os":   "linux",
				"beta.kubernetes.io/arch": runtime.GOARCH,
			},
			Annotations: map[string]string{
				cloudproviderapi.AnnotationAlphaProvidedIPAddr:           k.IP,
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{
				Key:    cloudproviderapi.TaintExternalCloudProvider,
				Value:  "true",
				Effect: corev1.TaintEffectNoSchedule,
			}},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Conditions:  append(pressureConditions(now), readyCondition(now, now)),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: k.IP},
				{Type: corev1.NodeHostName, Address: k.Name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				SystemUUID:              k.SystemUUID,
				KubeletVersion:          KubeletVersion,
				OperatingSystem:         "linux",
				Architecture:            runtime.GOARCH,
				ContainerRuntimeVersion: "stratus-dev://simulated",
				OSImage:                 "stratus dev simulated kubelet",
			},
		},
	}
}

func readyCondition(heartbeat, transition metav1.Time) corev1.NodeCondition {
	return corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		LastHeartbeatTime: heartbeat, LastTransitionTime: transition,
		Reason: "KubeletReady", Message: "kubelet is posting ready status",
	}
}

func pressureConditions(now metav1.Time) []corev1.NodeCondition {
	var out []corev1.NodeCondition
	for _, c := range []struct {
		t      corev1.NodeConditionType
		reason string
	}{
		{corev1.NodeMemoryPressure, "KubeletHasSufficientMemory"},
		{corev1.NodeDiskPressure, "KubeletHasNoDiskPressure"},
		{corev1.NodePIDPressure, "KubeletHasSufficientPID"},
	} {
		out = append(out, corev1.NodeCondition{Type: c.t, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now, Reason: c.reason})
	}
	return out
}

// heartbeater is one running kubelet's heartbeat state. It sends what a
// real kubelet sends, no more: in a cluster of hundreds of nodes the
// heartbeats are most of the API server's load, and a simulated fleet
// heavier than a real one would measure the test, not the cloud manager.
type heartbeater struct {
	k *Kubelet
	// lease is the Lease as last written: it is renewed by an update of
	// it, without a read first (client-go's lease controller), and read
	// again only after an update failed.
	lease *coordinationv1.Lease
	// reported is when the node status was last posted.
	reported time.Time
}

// beat renews the node Lease and posts the node status if it changed or
// StatusReportPeriod has passed since the last post. Failures are logged
// and retried on the next beat, as a kubelet does.
func (h *heartbeater) beat(ctx context.Context) {
	logger := log.FromContext(ctx)
	if err := h.renewLease(ctx); err != nil && ctx.Err() == nil {
		logger.Info("renewing node lease failed", "error", err.Error())
	}
	if err := h.postStatus(ctx); err != nil && ctx.Err() == nil {
		logger.Info("posting node status failed", "error", err.Error())
	}
}

func (h *heartbeater) renewLease(ctx context.Context) error {
	k := h.k
	leases := k.Client.CoordinationV1().Leases(nodeLeaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	if h.lease != nil {
		lease := h.lease.DeepCopy()
		lease.Spec.RenewTime = &now
		updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
		if err == nil {
			h.lease = updated
			return nil
		}
		// A conflict or a deleted Lease: read it again, as the lease
		// controller falls back to ensuring the Lease.
		h.lease = nil
	}
	lease, err := leases.Get(ctx, k.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err := k.Client.CoreV1().Nodes().Get(ctx, k.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("lease for node %s: %w", k.Name, err)
		}
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: k.Name, Namespace: nodeLeaseNamespace,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
			},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(k.Name), LeaseDurationSeconds: ptr.To[int32](leaseDurationSeconds), RenewTime: &now},
		}
		created, err := leases.Create(ctx, lease, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create lease of node %s: %w", k.Name, err)
		}
		h.lease = created
		return nil
	}
	if err != nil {
		return fmt.Errorf("get lease of node %s: %w", k.Name, err)
	}
	lease.Spec.RenewTime = &now
	lease.Spec.HolderIdentity = ptr.To(k.Name)
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](leaseDurationSeconds)
	updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("renew lease of node %s: %w", k.Name, err)
	}
	h.lease = updated
	return nil
}

// errNodeGone means the Node was deleted while its kubelet ran; a real
// kubelet would re-register only on restart.
var errNodeGone = errors.New("node object deleted")

// postStatus reads the Node as a kubelet does, from the API server's cache
// first (resourceVersion 0) and from storage after a conflict, and writes
// its status only when the Ready or pressure conditions need a change (a
// restarted kubelet's Node marked NotReady) or StatusReportPeriod has passed.
func (h *heartbeater) postStatus(ctx context.Context) error {
	k := h.k
	nodes := k.Client.CoreV1().Nodes()
	for try := range 2 {
		opts := metav1.GetOptions{}
		if try == 0 {
			opts.ResourceVersion = "0"
		}
		node, err := nodes.Get(ctx, k.Name, opts)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("post status of node %s: %w", k.Name, errNodeGone)
		}
		if err != nil {
			return fmt.Errorf("post status of node %s: %w", k.Name, err)
		}
		now := metav1.Now()
		changed := setStatus(node, now)
		if !changed && time.Since(h.reported) < StatusReportPeriod {
			return nil
		}
		_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		if err == nil {
			h.reported = now.Time
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("post status of node %s: %w", k.Name, err)
		}
	}
	return fmt.Errorf("post status of node %s: conflict twice", k.Name)
}

// setStatus refreshes node's Ready (True) and pressure (False) conditions
// with heartbeat time now and reports whether a condition's status changed
// (or Ready was missing).
func setStatus(node *corev1.Node, now metav1.Time) bool {
	changed, found := false, false
	for i, c := range node.Status.Conditions {
		switch c.Type {
		case corev1.NodeReady:
			found = true
			transition := c.LastTransitionTime
			if c.Status != corev1.ConditionTrue {
				transition, changed = now, true
			}
			node.Status.Conditions[i] = readyCondition(now, transition)
		case corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure:
			if c.Status != corev1.ConditionFalse {
				c.LastTransitionTime, changed = now, true
			}
			c.Status, c.LastHeartbeatTime = corev1.ConditionFalse, now
			node.Status.Conditions[i] = c
		}
	}
	if !found {
		node.Status.Conditions = append(node.Status.Conditions, readyCondition(now, now))
		changed = true
	}
	return changed
}
