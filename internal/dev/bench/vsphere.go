package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stratus-ccm/stratus/vcsim"
)

// vsphereCloud marks the scenarios run against a simulated vCenter: the
// upstream side is hack/kubebins' vsphere-ccm (the upstream CCM with the
// upstream vSphere provider), the stratus side stratus-ccm with its native
// vSphere provider, both with the same cloud config.
const vsphereCloud = "vsphere"

// vmPattern names the VMs (and their Nodes) of the vSphere scenarios.
const vmPattern = "vs-%05d"

// startVSphere runs a simulated vCenter with the scenario's VMs in this
// process, with the per-request latency of o.Cloud, and writes the vSphere
// cloud config (upstream's YAML format, the CA file for TLS).
func startVSphere(ctx context.Context, dir string, o Options, sc scenario) (*env, []string, func(), error) {
	vc, err := vcsim.Start(ctx, vcsim.Options{
		VMs:         sc.vms(o.Sizes),
		NamePattern: vmPattern,
		Latency:     time.Duration(o.Cloud.VSphereLatencyMS) * time.Millisecond,
		CAFile:      filepath.Join(dir, "vcenter-ca.pem"),
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("simulated vCenter: %w", err)
	}
	vms, err := vc.VMs(ctx)
	if err != nil {
		vc.Close()
		return nil, nil, nil, err
	}
	e := &env{vc: vc, vms: make(map[string]vcsim.VM, len(vms))}
	for _, vm := range vms {
		e.vms[vm.Name] = vm
	}
	cloudConfig := filepath.Join(dir, "vsphere.yaml")
	if err := os.WriteFile(cloudConfig, vc.CloudConfig(vcsim.TrustCAFile), 0o600); err != nil {
		vc.Close()
		return nil, nil, nil, err
	}
	// The inventory was built in-process; only the manager's requests count.
	vc.ResetRequests()
	return e, []string{"--cloud-provider=vsphere", "--cloud-config=" + cloudConfig}, vc.Close, nil
}

// vsphereMetrics adds the manager's vCenter requests since the last reset,
// scaled by scale (1 for totals, 3600/window for an hourly rate), in total
// and per operation ("vcenterRequests SOAP RetrievePropertiesEx",
// "vcenterRequests REST POST /rest/com/vmware/cis/session").
func vsphereMetrics(e *env, m Metrics, name string, scale float64) {
	r := e.vc.Requests()
	m[name] = float64(r.Total()) * scale
	for op, n := range r.SOAP {
		m[name+" SOAP "+op] = float64(n) * scale
	}
	for op, n := range r.REST {
		m[name+" REST "+op] = float64(n) * scale
	}
	for op, n := range r.Other {
		m[name+" other "+op] = float64(n) * scale
	}
}

// vmUUID is the BIOS UUID of VM name as kubelet reports it in
// status.nodeInfo.systemUUID (upper case, as read from the firmware).
func (e *env) vmUUID(name string) string { return strings.ToUpper(e.vms[name].UUID) }

// createInitializedVSphereNodes creates a Node per VM name as the upstream
// vSphere CCM leaves it (provider ID, instance-type and topology labels,
// addresses, no uninitialized taint): a cluster whose manager starts on
// nodes that joined long ago.
func (e *env) createInitializedVSphereNodes(ctx context.Context, names []string) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, name := range names {
		g.Go(func() error {
			vm := e.vms[name]
			const instanceType = "vsphere-vm.cpu-2.mem-4gb.os-ubuntu"
			n := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
					corev1.LabelHostname:                name,
					corev1.LabelInstanceTypeStable:      instanceType,
					corev1.LabelInstanceType:            instanceType,
					corev1.LabelTopologyZone:            vm.Zone,
					corev1.LabelFailureDomainBetaZone:   vm.Zone,
					corev1.LabelTopologyRegion:          vm.Region,
					corev1.LabelFailureDomainBetaRegion: vm.Region,
				}},
				Spec: corev1.NodeSpec{ProviderID: "vsphere://" + vm.UUID},
			}
			if _, err := e.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create node %s: %w", name, err)
			}
			now := metav1.Now()
			n.Status = corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}},
				Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: vm.Guest.NICs[0].IPs[0]}, {Type: corev1.NodeHostName, Address: name}},
				NodeInfo:   corev1.NodeSystemInfo{SystemUUID: e.vmUUID(name)},
			}
			if _, err := e.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("node %s status: %w", name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// quiet waits until the manager has made no vCenter request for d (its
// start-up work is done), at most limit; it returns whether it got quiet.
func (e *env) quiet(ctx context.Context, d, limit time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	last, since := e.vc.Requests().Total(), time.Now()
	err := e.until(ctx, "the manager's vCenter requests to pause", func(context.Context) (bool, error) {
		if n := e.vc.Requests().Total(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= d, nil
	})
	return err == nil
}

var vsphereScenarios = []scenario{
	{
		name:  "vsphere-node-init-burst",
		cloud: vsphereCloud,
		vms:   func(s Sizes) int { return s.VSphereBurstNodes },
		params: func(s Sizes) map[string]any {
			return map[string]any{"nodes": s.VSphereBurstNodes}
		},
		// The VMs exist; their kubelets register all at once.
		setup: func(context.Context, *env, Sizes) error { return nil },
		measure: func(ctx context.Context, e *env, s Sizes) (Metrics, error) {
			names := e.vc.Nodes()
			start := time.Now()
			if err := e.registerNodes(ctx, names); err != nil {
				return nil, err
			}
			if err := e.waitInitialized(ctx, len(names)); err != nil {
				return nil, err
			}
			m := Metrics{"secondsToAllInitialized": time.Since(start).Seconds()}
			vsphereMetrics(e, m, "vcenterRequests", 1)
			return m, nil
		},
	},
	{
		name:  "vsphere-steady-state",
		cloud: vsphereCloud,
		vms:   func(s Sizes) int { return s.VSphereSteadyNodes },
		params: func(s Sizes) map[string]any {
			return map[string]any{"nodes": s.VSphereSteadyNodes, "window": s.SteadyWindow.String()}
		},
		setup: func(ctx context.Context, e *env, s Sizes) error {
			return e.createInitializedVSphereNodes(ctx, e.vc.Nodes())
		},
		measure: func(ctx context.Context, e *env, s Sizes) (Metrics, error) {
			names := e.vc.Nodes()
			if err := e.waitInitialized(ctx, len(names)); err != nil {
				return nil, err
			}
			// Start-up work (the upstream provider discovers every node it
			// sees; stratus lists once and starts its watch) is not the
			// steady state: the window starts when requests pause.
			gotQuiet := e.quiet(ctx, 15*time.Second, 10*time.Minute)
			startup := e.vc.Requests().Total()
			e.vc.ResetRequests()
			beats, err := e.heartbeat(ctx, names, min(heartbeatPeriod, s.SteadyWindow), s.SteadyWindow)
			if err != nil {
				return nil, err
			}
			m := Metrics{
				checkPrefix + "node status reports by the harness":  float64(beats),
				checkPrefix + "start-up requests before the window": float64(startup),
				checkPrefix + "requests paused before the window":   boolMetric(gotQuiet),
			}
			vsphereMetrics(e, m, "vcenterRequestsPerHour", 3600/s.SteadyWindow.Seconds())
			return m, nil
		},
	},
}

func boolMetric(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
