package devenv

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/controller/service"
)

// narrator prints a readable stream of what happens in the cluster: nodes
// registered, initialized (with provider ID, zone and type), getting a pod
// CIDR, going NotReady, tainted as shut down, deleted; Services getting a
// load-balancer address; and the Events the controllers record.
type narrator struct {
	out    io.Writer
	client kubernetes.Interface
	mu     sync.Mutex // serializes lines
	start  time.Time
}

func (n *narrator) say(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.out, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (n *narrator) run(ctx context.Context) {
	n.start = time.Now()
	factory := informers.NewSharedInformerFactory(n.client, 0)
	_, _ = factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if node, ok := obj.(*corev1.Node); ok && !initial {
				n.say("node %s registered by its kubelet (uninitialized taint: %t)", node.Name, hasTaintKey(node, cloudproviderapi.TaintExternalCloudProvider))
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			c, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 {
				for _, line := range nodeChanges(o, c) {
					n.say("%s", line)
				}
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if node, ok := obj.(*corev1.Node); ok {
				n.say("node %s deleted", node.Name)
			}
		},
	})
	_, _ = factory.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Service)
			c, ok2 := newObj.(*corev1.Service)
			if ok1 && ok2 {
				if line := lbReadyChange(o, c); line != "" {
					n.say("%s", line)
				}
				if before, after := ingressOf(o), ingressOf(c); before != after {
					if after == "" {
						n.say("service %s/%s: load balancer removed", c.Namespace, c.Name)
					} else {
						n.say("service %s/%s: load balancer ingress %s", c.Namespace, c.Name, after)
					}
				}
			}
		},
	})
	_, _ = factory.Core().V1().Events().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if ev, ok := obj.(*corev1.Event); ok && narrated(ev) && eventTime(ev).After(n.start.Add(-time.Second)) {
				n.say("event %s %s: %s: %s", ev.InvolvedObject.Kind, objName(ev.InvolvedObject), ev.Reason, ev.Message)
			}
		},
	})
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
}

// nodeChanges describes, in order, what changed on a node that a user of
// stratus cares about.
func nodeChanges(o, c *corev1.Node) []string {
	var out []string
	if hasTaintKey(o, cloudproviderapi.TaintExternalCloudProvider) && !hasTaintKey(c, cloudproviderapi.TaintExternalCloudProvider) {
		out = append(out, fmt.Sprintf("node %s initialized: provider ID %s, zone %s, type %s, addresses %s",
			c.Name, c.Spec.ProviderID, c.Labels[corev1.LabelTopologyZone], c.Labels[corev1.LabelInstanceTypeStable], addresses(c)))
	}
	if o.Spec.PodCIDR == "" && c.Spec.PodCIDR != "" {
		out = append(out, fmt.Sprintf("node %s: pod CIDR %s", c.Name, c.Spec.PodCIDR))
	}
	if was, is := readyStatus(o), readyStatus(c); was != is {
		out = append(out, fmt.Sprintf("node %s: Ready=%s", c.Name, is))
	}
	if was, is := hasTaintKey(o, cloudproviderapi.TaintNodeShutdown), hasTaintKey(c, cloudproviderapi.TaintNodeShutdown); was != is {
		if is {
			out = append(out, fmt.Sprintf("node %s: tainted %s (its instance is shut down)", c.Name, cloudproviderapi.TaintNodeShutdown))
		} else {
			out = append(out, fmt.Sprintf("node %s: shutdown taint removed", c.Name))
		}
	}
	if !networkReady(o) && networkReady(c) {
		out = append(out, fmt.Sprintf("node %s: pod network route in place (NetworkUnavailable=False)", c.Name))
	}
	return out
}

func hasTaintKey(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

func networkReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeNetworkUnavailable {
			return c.Status == corev1.ConditionFalse
		}
	}
	return false
}

func addresses(n *corev1.Node) string {
	var parts []string
	for _, a := range n.Status.Addresses {
		parts = append(parts, string(a.Type)+"="+a.Address)
	}
	return strings.Join(parts, " ")
}

// lbReadyChange describes a change of the Service's LoadBalancerReady
// condition (Ready, CloudError, Provisioning, ...), so an outage and the
// recovery from it show in the stream; "" when its reason did not change.
func lbReadyChange(o, c *corev1.Service) string {
	was := meta.FindStatusCondition(o.Status.Conditions, service.ConditionLoadBalancerReady)
	is := meta.FindStatusCondition(c.Status.Conditions, service.ConditionLoadBalancerReady)
	if is == nil || (was != nil && was.Reason == is.Reason) {
		return ""
	}
	return fmt.Sprintf("service %s/%s: %s=%s (%s): %s", c.Namespace, c.Name, is.Type, is.Status, is.Reason, is.Message)
}

func ingressOf(s *corev1.Service) string {
	var parts []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			parts = append(parts, in.IP)
		} else if in.Hostname != "" {
			parts = append(parts, in.Hostname)
		}
	}
	return strings.Join(parts, ",")
}

// narrated reports whether an Event is about what stratus deals with: Nodes
// and Services (but not the API server's own default/kubernetes Service).
func narrated(ev *corev1.Event) bool {
	switch ev.InvolvedObject.Kind {
	case "Node":
		return true
	case "Service":
		return !(ev.InvolvedObject.Namespace == metav1.NamespaceDefault && ev.InvolvedObject.Name == "kubernetes")
	default:
		return false
	}
}

func eventTime(ev *corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	default:
		return ev.CreationTimestamp.Time
	}
}

func objName(ref corev1.ObjectReference) string {
	if ref.Namespace == "" {
		return ref.Name
	}
	return ref.Namespace + "/" + ref.Name
}
