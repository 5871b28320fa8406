package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

// e2eClusterCIDR holds every pod CIDR podCIDR hands out.
const e2eClusterCIDR = "10.128.0.0/10"

// e2eScenarios run stratus's real controllers (stratus-ccm in this
// process) against the control plane with the provider under test.
func e2eScenarios() []Scenario {
	return []Scenario{
		{Name: "e2e/node-initialized", Needs: []Need{NeedManager, NeedInstances}, Doc: "A Node registered as a kubelet would gets the provider ID, addresses and topology labels, and loses the uninitialized taint.",
			run: func(ctx context.Context, e *env) error {
				_, _, err := e.joined(ctx)
				return err
			}},
		{Name: "e2e/load-balancer-ingress", Needs: []Need{NeedManager, NeedInstances, NeedLoadBalancer}, Doc: "A LoadBalancer Service gets an ingress, and the load balancer's backends are the cluster's Nodes.",
			run: func(ctx context.Context, e *env) error { return e.e2eLoadBalancer(ctx, false) }},
		{Name: "e2e/load-balancer-traffic", Needs: []Need{NeedManager, NeedInstances, NeedLoadBalancer, NeedTraffic}, Doc: "Traffic through a LoadBalancer Service's ingress reaches every Node.",
			run: func(ctx context.Context, e *env) error { return e.e2eLoadBalancer(ctx, true) }},
		{Name: "e2e/route-programmed", Needs: []Need{NeedManager, NeedInstances, NeedRoutes}, Doc: "A Node with a pod CIDR gets a route to its machine and the condition NetworkUnavailable=False.",
			run: func(ctx context.Context, e *env) error {
				cidr := e.podCIDR()
				n, _, err := e.joinedWith(ctx, func(n *v1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr} })
				if err != nil {
					return err
				}
				cluster := e.e2eCluster()
				if err := e.eventually(ctx, func(ctx context.Context) error {
					all, err := e.routes.ListRoutes(ctx, cluster)
					if err != nil {
						return fmt.Errorf("ListRoutes: %w", err)
					}
					i := slices.IndexFunc(all, func(r *cloudprovider.Route) bool { return r.DestinationCIDR == cidr })
					if i < 0 || string(all[i].TargetNode) != n.Name {
						return expected("route "+cidr, "to node "+n.Name, routeString(all, i))
					}
					return nil
				}); err != nil {
					return err
				}
				return e.eventually(ctx, func(ctx context.Context) error {
					got, err := e.kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
					if err != nil {
						return fmt.Errorf("get Node %s: %w", n.Name, err)
					}
					for _, c := range got.Status.Conditions {
						if c.Type == v1.NodeNetworkUnavailable {
							if c.Status == v1.ConditionFalse {
								return nil
							}
							return expected("NetworkUnavailable of Node "+n.Name, "False", c.Status)
						}
					}
					return expected("NetworkUnavailable of Node "+n.Name, "False", "no condition")
				})
			}},
	}
}

// e2eCluster is the cluster name of the end-to-end manager, apart from
// the provider-level scenarios' so that its route and orphan cleanup
// leave their objects alone.
func (e *env) e2eCluster() string { return e.cfg.ClusterName + "-e2e" }

// joined creates a machine, registers its Node as a kubelet would and
// waits until stratus initialized it.
func (e *env) joined(ctx context.Context) (*v1.Node, *Machine, error) { return e.joinedWith(ctx, nil) }

// joinedWith is joined with the Node changed before it registers.
func (e *env) joinedWith(ctx context.Context, change func(*v1.Node)) (*v1.Node, *Machine, error) {
	if err := e.startManager(); err != nil {
		return nil, nil, err
	}
	m, err := e.machine(ctx)
	if err != nil {
		return nil, nil, err
	}
	n := m.Node.DeepCopy()
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule})
	if change != nil {
		change(n)
	}
	if _, err := e.register(ctx, n); err != nil {
		return nil, nil, err
	}
	var got *v1.Node
	err = e.eventually(ctx, func(ctx context.Context) error {
		if err := e.managerExited(); err != nil {
			return err
		}
		got, err = e.kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get Node %s: %w", n.Name, err)
		}
		if slices.ContainsFunc(got.Spec.Taints, func(t v1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider }) {
			return expected("taints of Node "+n.Name, "no "+cloudproviderapi.TaintExternalCloudProvider, got.Spec.Taints)
		}
		w := m.Want
		switch {
		case w.ProviderID != "" && got.Spec.ProviderID != w.ProviderID:
			return expected("provider ID of Node "+n.Name, w.ProviderID, got.Spec.ProviderID)
		case len(w.NodeAddresses) > 0 && !sameAddresses(got.Status.Addresses, initializedAddresses(m)):
			return expected("addresses of Node "+n.Name, initializedAddresses(m), got.Status.Addresses)
		case w.Zone != "" && got.Labels[v1.LabelTopologyZone] != w.Zone:
			return expected("label "+v1.LabelTopologyZone+" of Node "+n.Name, w.Zone, got.Labels[v1.LabelTopologyZone])
		case w.Region != "" && got.Labels[v1.LabelTopologyRegion] != w.Region:
			return expected("label "+v1.LabelTopologyRegion+" of Node "+n.Name, w.Region, got.Labels[v1.LabelTopologyRegion])
		case w.InstanceType != "" && got.Labels[v1.LabelInstanceTypeStable] != w.InstanceType:
			return expected("label "+v1.LabelInstanceTypeStable+" of Node "+n.Name, w.InstanceType, got.Labels[v1.LabelInstanceTypeStable])
		}
		return nil
	})
	return got, m, err
}

// e2eLoadBalancer joins two nodes, creates a LoadBalancer Service and
// waits for its ingress, its backends and, with traffic, for connections
// through it to reach both nodes.
func (e *env) e2eLoadBalancer(ctx context.Context, traffic bool) error {
	var nodes []*v1.Node
	var ms []*Machine
	for range 2 {
		n, m, err := e.joined(ctx)
		if err != nil {
			return err
		}
		nodes, ms = append(nodes, n), append(ms, m)
	}
	ns, err := e.namespace(ctx)
	if err != nil {
		return err
	}
	svc, err := e.createService(ctx, ns)
	if err != nil {
		return err
	}
	if traffic {
		stop, err := e.traffic.ServeNodePort(ctx, ms, svc.Spec.Ports[0].NodePort)
		if err != nil {
			return fmt.Errorf("driver: serve NodePort: %w", err)
		}
		defer stop()
	}
	var st *v1.LoadBalancerStatus
	if err := e.eventually(ctx, func(ctx context.Context) error {
		got, err := e.kube.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get Service %s/%s: %w", ns, svc.Name, err)
		}
		if len(got.Status.LoadBalancer.Ingress) == 0 {
			return expected("ingress of Service "+ns+"/"+svc.Name, "an ingress", "none")
		}
		st = &got.Status.LoadBalancer
		svc = got
		return nil
	}); err != nil {
		return err
	}
	if traffic {
		return e.reaches(ctx, st, svc.Spec.Ports[0].Port, nodes)
	}
	if e.lbd == nil {
		return nil
	}
	return e.wantBackendsIn(ctx, e.e2eCluster(), svc, nodes)
}

// createService creates a LoadBalancer Service in ns on a free NodePort,
// deleted after the scenario.
func (e *env) createService(ctx context.Context, ns string) (*v1.Service, error) {
	var lastErr error
	for range 10 {
		svc := e.service()
		svc.Namespace, svc.UID = ns, ""
		out, err := e.kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		if err == nil {
			e.later(func(ctx context.Context) error {
				if err := e.kube.CoreV1().Services(ns).Delete(ctx, out.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("delete Service %s/%s: %w", ns, out.Name, err)
				}
				// stratus deletes the load balancer; wait so that the
				// next scenario starts from a clean cloud.
				return e.eventually(ctx, func(ctx context.Context) error { return e.wantLB(ctx, e.e2eCluster(), out, false) })
			})
			return out, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("create a LoadBalancer Service with a free NodePort: %w", lastErr)
}

// namespace returns the run's namespace for Services, created once.
func (e *env) namespace(ctx context.Context) (string, error) {
	name := e.namespaceName()
	_, err := e.kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create namespace %s: %w", name, err)
	}
	return name, nil
}

// namespaceName is the name of the run's namespace.
func (e *env) namespaceName() string { return "conformance-" + e.runID }

// Manager is the cloud controller manager the kit checks a provider in
// (Config.Manager). pkg/app.Manager is stratus-ccm's.
type Manager interface {
	// Run runs the manager with these command-line arguments (the flags
	// of stratus-ccm, which are upstream's) until ctx is done, logging
	// to the logr.Logger of ctx.
	Run(ctx context.Context, args []string) error
	// InstancesV2 returns the InstancesV2 the manager reads a provider
	// registered as name through when the provider implements Instances
	// and Zones but not InstancesV2.
	InstancesV2(name string, raw cloudprovider.Interface) cloudprovider.InstancesV2
}

// e2eManager is the Manager running in this process.
type e2eManager struct {
	dir    string
	cancel context.CancelFunc
	done   chan error
}

// managerExited returns an error when stratus-ccm has exited.
func (e *env) managerExited() error {
	if e.e2e == nil {
		return nil
	}
	select {
	case err := <-e.e2e.done:
		e.e2e.done <- err
		return fmt.Errorf("stratus-ccm exited: %v", err)
	default:
		return nil
	}
}

// startManager starts stratus-ccm for the provider the first time an
// end-to-end scenario needs it.
func (e *env) startManager() error {
	if e.e2e != nil {
		return e.managerExited()
	}
	dir, err := os.MkdirTemp("", "stratus-conformance-")
	if err != nil {
		return fmt.Errorf("stratus-ccm: %w", err)
	}
	m := &e2eManager{dir: dir, done: make(chan error, 1)}
	cloudConfig := filepath.Join(dir, "cloud-config")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(cloudConfig, e.cfg.CloudConfig, 0o600); err != nil {
		m.stop()
		return fmt.Errorf("stratus-ccm: write the cloud config: %w", err)
	}
	if err := WriteKubeconfig(e.cfg.KubeConfig, kubeconfig); err != nil {
		m.stop()
		return fmt.Errorf("stratus-ccm: %w", err)
	}
	args := []string{
		"--cloud-provider=" + e.cfg.Provider,
		"--cloud-config=" + cloudConfig,
		"--kubeconfig=" + kubeconfig,
		"--cluster-name=" + e.e2eCluster(),
		"--leader-elect=false",
		"--secure-port=0",
		"--node-monitor-period=1s",
		"--configure-cloud-routes=" + strconv.FormatBool(e.routes != nil),
		"--cluster-cidr=" + e2eClusterCIDR,
	}
	logger := e.cfg.ManagerLog
	if logger.GetSink() == nil {
		logger = logr.Discard()
	}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logger))
	m.cancel = cancel
	go func() { m.done <- e.cfg.Manager.Run(ctx, args) }()
	e.e2e = m
	return nil
}

func (m *e2eManager) stop() {
	if m.cancel != nil {
		m.cancel()
		<-m.done
	}
	os.RemoveAll(m.dir)
}

// WriteKubeconfig writes c as a kubeconfig file at path, for a process
// the kit or a driver starts (stratus-ccm, a plugin).
func WriteKubeconfig(c *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["conformance"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData, CertificateAuthority: c.CAFile, InsecureSkipTLSVerify: c.Insecure}
	kc.AuthInfos["conformance"] = &clientcmdapi.AuthInfo{Token: c.BearerToken, ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, ClientCertificate: c.CertFile, ClientKey: c.KeyFile}
	kc.Contexts["conformance"] = &clientcmdapi.Context{Cluster: "conformance", AuthInfo: "conformance"}
	kc.CurrentContext = "conformance"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write the kubeconfig %s: %w", path, err)
	}
	return nil
}
