package devenv

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
	"github.com/stratus-ccm/stratus/vcsim"
)

// DemoOptions configure Demo.
type DemoOptions struct {
	// StateDir is the state dir of the running environment.
	StateDir string
	// Out receives the progress. Default os.Stdout.
	Out io.Writer
	// StepTimeout bounds each step (default 3 minutes).
	StepTimeout time.Duration
}

// Conn is a connection to a running dev environment: its API server and
// its clouds, found through the files in the state dir.
type Conn struct {
	Kube  kubernetes.Interface
	Cloud *client.Client
	// VCenter drives the simulated vCenter of a `stratus dev --cloud
	// vsphere` (nil with minicloud machines).
	VCenter *vcsim.Remote
	// Machines is the --cloud the environment was started with
	// (CloudMinicloud, CloudOpenStack or CloudVSphere).
	Machines string
	// RealNodes says the environment runs real nodes (--real-nodes).
	RealNodes bool
}

// Connect reads <stateDir>/kubeconfig and <stateDir>/env of a running
// environment (and, with --cloud vsphere, the vCenter's server.json that
// the env file points at).
func Connect(stateDir string) (*Conn, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(stateDir, "kubeconfig"))
	if err != nil {
		return nil, fmt.Errorf("no dev environment in %s (is `stratus dev` running?): %w", stateDir, err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	vars, err := readEnvFile(filepath.Join(stateDir, EnvFile))
	if err != nil {
		return nil, err
	}
	cloud, err := client.New(vars["MINICLOUD_URL"], vars["MINICLOUD_TOKEN"], client.WithUserAgent("stratus-dev-demo"))
	if err != nil {
		return nil, fmt.Errorf("minicloud client: %w", err)
	}
	conn := &Conn{Kube: kube, Cloud: cloud, Machines: CloudMinicloud, RealNodes: realNodesRunning(stateDir)}
	if raw, err := os.ReadFile(filepath.Join(stateDir, cloudFile)); err == nil {
		conn.Machines = strings.TrimSpace(string(raw))
	}
	if dir := vars[vcsim.StateDirEnv]; dir != "" {
		st, err := vcsim.ReadState(dir)
		if err != nil {
			return nil, fmt.Errorf("the dev environment's vCenter: %w", err)
		}
		if conn.VCenter, err = vcsim.NewRemote(st.RemoteOptions()); err != nil {
			return nil, fmt.Errorf("the dev environment's vCenter: %w", err)
		}
	}
	return conn, nil
}

// readEnvFile parses the export lines writeEnvFile writes.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s (is `stratus dev` running?): %w", path, err)
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "export ")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			v = strings.ReplaceAll(v[1:len(v)-1], `'\''`, "'")
		}
		vars[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return vars, nil
}

// Demo walks through what stratus does, against a running environment:
// a new instance joins and is initialized, a LoadBalancer Service gets an
// address that answers over HTTP, the instance is stopped (shutdown taint)
// and deleted (node removed). On a --cloud openstack environment the
// instance is a Nova server (an openstack:/// provider ID) and the address is
// the Octavia load balancer's floating IP. On a --cloud vsphere environment the machine
// is a VM (initialized with a vsphere:// provider ID and its zone tag),
// powered off and destroyed, and the demo shows it leaving the load
// balancer. It cleans up the Service it created.
func Demo(ctx context.Context, opts DemoOptions) error {
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
	}
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	if opts.StepTimeout == 0 {
		opts.StepTimeout = 3 * time.Minute
	}
	conn, err := Connect(opts.StateDir)
	if err != nil {
		return err
	}
	d := &demo{Conn: conn, out: opts.Out, timeout: opts.StepTimeout, steps: 5}
	if conn.RealNodes {
		d.steps = 6
	}
	return d.run(ctx)
}

type demo struct {
	*Conn
	out     io.Writer
	timeout time.Duration
	step    int
	steps   int
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "   %s\n", fmt.Sprintf(format, args...))
}

func (d *demo) begin(title string) {
	d.step++
	fmt.Fprintf(d.out, "\n[%d/%d] %s\n", d.step, d.steps, title)
}

// waitFor polls cond every second until it holds or the step times out.
func (d *demo) waitFor(ctx context.Context, what string, cond wait.ConditionWithContextFunc) error {
	start := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, time.Second, d.timeout, true, cond); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	d.say("... %s (%s)", what, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// demoMachine is the machine the demo adds, stops and removes.
type demoMachine struct {
	// ip is its InternalIP, a load balancer target.
	ip string
	// joined reports whether its node was initialized as its cloud does it.
	joined func(*corev1.Node) bool
	// stop and remove act on it in its cloud and say what they did.
	stop, remove func(ctx context.Context) error
}

func (d *demo) run(ctx context.Context) error {
	suffix := make([]byte, 2)
	_, _ = rand.Read(suffix)
	name := "demo-" + hex.EncodeToString(suffix)

	var m *demoMachine
	var err error
	openstack := d.Machines == CloudOpenStack
	switch {
	case d.VCenter != nil:
		d.begin("Nodes are initialized by stratus's vSphere provider: vsphere:// provider IDs, zones from vCenter tags")
		m, err = d.createVM(ctx, name)
	case openstack:
		d.begin("Nodes are initialized by stratus's OpenStack provider: openstack:/// provider IDs, zones and flavors from Nova")
		m, err = d.createInstance(ctx, name)
	default:
		d.begin("Nodes are initialized by stratus with provider ID, zone and type labels")
		m, err = d.createInstance(ctx, name)
	}
	if err != nil {
		return err
	}
	if err := d.waitFor(ctx, "node "+name+" joined and every node initialized", func(ctx context.Context) (bool, error) {
		n, err := d.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil || !m.joined(n) {
			return false, nil
		}
		return d.allInitialized(ctx)
	}); err != nil {
		return err
	}
	nodes, err := d.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		d.say("%-12s %-22s zone=%s type=%s podCIDR=%s", n.Name, n.Spec.ProviderID, n.Labels[corev1.LabelTopologyZone], n.Labels[corev1.LabelInstanceTypeStable], n.Spec.PodCIDR)
	}

	if openstack {
		d.begin("A LoadBalancer Service gets an external IP: an Octavia load balancer and a Neutron floating IP")
	} else {
		d.begin("A LoadBalancer Service gets an external IP")
	}
	svc, err := d.createService(ctx)
	if err != nil {
		return err
	}
	defer func() {
		_ = d.Kube.CoreV1().Services(svc.Namespace).Delete(context.WithoutCancel(ctx), svc.Name, metav1.DeleteOptions{})
	}()
	if d.RealNodes {
		if err := d.createDemoDeployment(ctx); err != nil {
			return err
		}
		defer func() {
			_ = d.Kube.AppsV1().Deployments(metav1.NamespaceDefault).Delete(context.WithoutCancel(ctx), demoApp, metav1.DeleteOptions{})
		}()
	}
	var ip string
	if err := d.waitFor(ctx, "ingress IP assigned", func(ctx context.Context) (bool, error) {
		s, err := d.Kube.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ip = ingressOf(s)
		return ip != "", nil
	}); err != nil {
		return err
	}
	d.say("service %s/%s: EXTERNAL-IP %s", svc.Namespace, svc.Name, ip)

	if d.RealNodes {
		if err := d.realTraffic(ctx, svc, ip); err != nil {
			return err
		}
		return d.machineLifecycle(ctx, svc, name, m)
	}
	switch {
	case d.VCenter != nil:
		d.begin("An HTTP request through that IP reaches a vSphere node (minicloud's load balancer, over the peer network)")
	case openstack:
		d.begin("An HTTP request through that floating IP reaches a node (the Octavia pool's members)")
	default:
		d.begin("An HTTP request through that IP reaches a node")
	}
	var reply Reply
	if err := d.waitFor(ctx, "load balancer answers", func(ctx context.Context) (bool, error) {
		r, err := GetReply(ctx, "http://"+net.JoinHostPort(ip, "80")+"/")
		if err != nil {
			return false, nil
		}
		reply = r
		return true, nil
	}); err != nil {
		return err
	}
	d.say("GET http://%s/ -> answered by node %s for service %s/%s", ip, reply.Node, reply.Namespace, reply.Service)
	return d.machineLifecycle(ctx, svc, name, m)
}

// machineLifecycle stops the demo's machine (the shutdown taint) and
// removes it (the node deleted).
func (d *demo) machineLifecycle(ctx context.Context, svc *corev1.Service, name string, m *demoMachine) error {

	if d.VCenter != nil {
		d.begin("A powered-off VM: its node goes NotReady and gets the shutdown taint")
	} else {
		d.begin("A stopped instance: its node goes NotReady and gets the shutdown taint")
	}
	if err := m.stop(ctx); err != nil {
		return err
	}
	if err := d.waitFor(ctx, "node "+name+" tainted "+cloudproviderapi.TaintNodeShutdown, func(ctx context.Context) (bool, error) {
		n, err := d.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && hasTaintKey(n, cloudproviderapi.TaintNodeShutdown), nil
	}); err != nil {
		return err
	}

	if d.VCenter != nil {
		d.begin("A destroyed VM: its node leaves the load balancer, and is removed after the grace period")
	} else {
		d.begin("A deleted instance: its node is removed after the grace period")
	}
	if d.VCenter != nil {
		if targets, err := d.targets(ctx, svc); err == nil && slices.Contains(targets, m.ip) {
			d.say("node %s (%s) is still a target of the load balancer (failing its health checks)", name, m.ip)
		}
	}
	if err := m.remove(ctx); err != nil {
		return err
	}
	if d.VCenter != nil {
		if err := d.waitFor(ctx, "node "+name+" ("+m.ip+") out of the load balancer", func(ctx context.Context) (bool, error) {
			targets, err := d.targets(ctx, svc)
			return err == nil && len(targets) > 0 && !slices.Contains(targets, m.ip), nil
		}); err != nil {
			return err
		}
		if _, err := d.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
			d.say("node %s still exists: the deletion guard keeps it until it has been NotReady for the grace period", name)
		}
	}
	if err := d.waitFor(ctx, "node "+name+" deleted", func(ctx context.Context) (bool, error) {
		_, err := d.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "\nDone: that is stratus's job. The demo Service is removed; the other nodes keep running.\n")
	return nil
}

// createInstance creates a minicloud instance that gets a kubelet.
func (d *demo) createInstance(ctx context.Context, name string) (*demoMachine, error) {
	in, err := d.Cloud.CreateInstance(ctx, api.InstanceCreate{
		Name: name, Type: instanceType, Zone: minicloud.Zones[len(minicloud.Zones)-1],
		Tags: map[string]string{NodeTagKey: NodeTagValue},
	})
	if err != nil {
		return nil, fmt.Errorf("create instance %s: %w", name, err)
	}
	d.say("created minicloud instance %s (%s, private IP %s); its kubelet registers node %s", in.ID, in.Zone, in.PrivateIP, name)
	joined := func(*corev1.Node) bool { return true }
	if d.Machines == CloudOpenStack {
		d.say("instance %s is Nova server %s: stratus's openstack provider finds it by name", in.ID, in.ID)
		joined = func(n *corev1.Node) bool { return n.Spec.ProviderID == OpenStackProviderIDPrefix+in.ID }
	}
	return &demoMachine{
		ip:     in.PrivateIP,
		joined: joined,
		stop: func(ctx context.Context) error {
			if _, err := d.Cloud.StopInstance(ctx, in.ID); err != nil {
				return fmt.Errorf("stop instance %s: %w", in.ID, err)
			}
			d.say("stopped instance %s; node %s stops heartbeating (NotReady after %s)", in.ID, name, NodeMonitorGracePeriod)
			return nil
		},
		remove: func(ctx context.Context) error {
			if err := d.Cloud.DeleteInstance(ctx, in.ID); err != nil {
				return fmt.Errorf("delete instance %s: %w", in.ID, err)
			}
			d.say("deleted instance %s", in.ID)
			return nil
		},
	}, nil
}

// createVM creates a VM in the simulated vCenter: powered on, it gets a
// kubelet, and the vSphere provider initializes its node with the VM's
// UUID and the zone tag of its host or cluster.
func (d *demo) createVM(ctx context.Context, name string) (*demoMachine, error) {
	vm, err := d.VCenter.Create(ctx, vcsim.VMSpec{Name: name})
	if err != nil {
		return nil, fmt.Errorf("create VM %s: %w", name, err)
	}
	ip, ok := vmIPv4(vm)
	if !ok {
		return nil, fmt.Errorf("create VM %s: its guest reports no IPv4 address", name)
	}
	d.say("created VM %s (UUID %s, host %s, zone tag %s, IP %s); its kubelet registers node %s", name, vm.UUID, vm.Host, vm.Zone, ip, name)
	return &demoMachine{
		ip: ip.String(),
		joined: func(n *corev1.Node) bool {
			return strings.EqualFold(n.Spec.ProviderID, "vsphere://"+vm.UUID) && n.Labels[corev1.LabelTopologyZone] == vm.Zone
		},
		stop: func(ctx context.Context) error {
			if _, err := d.VCenter.PowerOff(ctx, name); err != nil {
				return fmt.Errorf("power off VM %s: %w", name, err)
			}
			d.say("powered VM %s off; node %s stops heartbeating (NotReady after %s)", name, name, NodeMonitorGracePeriod)
			return nil
		},
		remove: func(ctx context.Context) error {
			if err := d.VCenter.Destroy(ctx, name); err != nil {
				return fmt.Errorf("destroy VM %s: %w", name, err)
			}
			d.say("destroyed VM %s", name)
			return nil
		},
	}, nil
}

// targets returns the IPs of the Service's minicloud load balancer's
// targets.
func (d *demo) targets(ctx context.Context, svc *corev1.Service) ([]string, error) {
	lbs, err := d.Cloud.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagServiceUID: string(svc.UID)}})
	if err != nil {
		return nil, fmt.Errorf("load balancer of service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if len(lbs) != 1 {
		return nil, fmt.Errorf("load balancer of service %s/%s: %d found", svc.Namespace, svc.Name, len(lbs))
	}
	var ips []string
	for _, t := range lbs[0].Targets {
		ips = append(ips, t.IP)
	}
	return ips, nil
}

func (d *demo) allInitialized(ctx context.Context) (bool, error) {
	nodes, err := d.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, nil
	}
	for _, n := range nodes.Items {
		if !Initialized(&n) {
			return false, nil
		}
	}
	return len(nodes.Items) > 0, nil
}

// Initialized reports whether the cloud node controller initialized n: a
// provider ID, zone and instance-type labels, and no uninitialized taint.
func Initialized(n *corev1.Node) bool {
	return n.Spec.ProviderID != "" && n.Labels[corev1.LabelTopologyZone] != "" &&
		n.Labels[corev1.LabelInstanceTypeStable] != "" && !hasTaintKey(n, cloudproviderapi.TaintExternalCloudProvider)
}

func (d *demo) createService(ctx context.Context) (*corev1.Service, error) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "stratus-demo"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "stratus-demo"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
	created, err := d.Kube.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = d.Kube.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("create service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	d.say("created service %s/%s (type LoadBalancer, port 80 -> NodePort %s)", created.Namespace, created.Name, strconv.Itoa(int(created.Spec.Ports[0].NodePort)))
	return created, nil
}

// GetReply sends GET url on a new connection and decodes a simulated
// backend's Reply.
func GetReply(ctx context.Context, url string) (Reply, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Reply{}, err
	}
	// A new connection per request: a load balancer picks the backend per
	// connection, so a kept-alive one would always reach the same node.
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Reply{}, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Reply{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var r Reply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return Reply{}, fmt.Errorf("GET %s: decode reply: %w", url, err)
	}
	if r.Node == "" {
		return Reply{}, errors.New("GET " + url + ": reply names no node")
	}
	return r, nil
}
