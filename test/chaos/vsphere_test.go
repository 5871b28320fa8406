package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/vcsim"
)

// vSphere fault kinds.
const (
	faultVCenterSOAPFaults = "vCenter SOAP faults (SystemError) on every property read and watch"
	faultVCenter503        = "vCenter answers HTTP 503 to every property read and watch"
	faultVCenterStopped    = "vCenter stopped (listener closed), restarted after half a step"
	faultVCenterLatency    = "vCenter latency 400 ms on every request"
)

// The SOAP calls the vSphere provider reads the inventory with.
var vcenterReads = []string{"RetrieveProperties", "RetrievePropertiesEx", "ContinueRetrievePropertiesEx", "WaitForUpdatesEx"}

// vsphereShort is the vSphere run under `go test`: a few VMs and Services,
// every fault kind once.
var vsphereShort = size{nodes: 4, services: 4, replicas: 2, window: 25 * time.Second, churnEvery: time.Second,
	faultStep: 3 * time.Second, killEvery: 20 * time.Second, partitionFor: 8 * time.Second,
	converge: 3 * time.Minute, trafficSample: 4}

// vsphereBlock is the vSphere run's loopback block (see pools).
const vsphereBlock = 252

// The VMs' network (vcsim's node addresses, 10.0.<i/250>.<i%250+1>) and
// the loopback block through which minicloud's load balancers reach it,
// the upper half of the run's instance pool (127.252.0.0/18).
var vmPeer = minicloud.PeerNetwork{Network: netip.MustParsePrefix("10.0.0.0/19"),
	Via: netip.MustParsePrefix(fmt.Sprintf("127.%d.32.0/19", vsphereBlock))}

// TestChaosVSphere is the chaos run with stratus's native vSphere provider
// (providers/vsphere) for the nodes, against a simulated vCenter
// (vcsim, govmomi's simulator, in this process), and minicloud
// for the load balancers (foreignNodes: internalIP), as `stratus dev
// --cloud vsphere` runs them. The churn creates, powers off, powers on and
// destroys VMs; the faults are the simulator's (SOAP faults and HTTP 503 on
// the provider's inventory reads and watch, the vCenter stopped and
// started) and minicloud's on the load balancers' calls. No routes: the
// vSphere provider has none.
func TestChaosVSphere(t *testing.T) {
	password := minicloudtest.RandomToken()
	var vc *vcsim.Server
	var mu sync.Mutex
	stops := 0
	p := &provider{
		name:      "vsphere (providers/vsphere on vcsim) with minicloud load balancers",
		short:     vsphereShort,
		block:     vsphereBlock,
		cloudArgs: []string{fmt.Sprintf("--instance-cidr=127.%d.0.0/19", vsphereBlock), "--peer-network=" + vmPeer.Network.String() + "=" + vmPeer.Via.String()},
		setup: func(t *testing.T, c *chaosCloud) []string {
			var err error
			vc, err = vcsim.Start(context.Background(), vcsim.Options{
				Listen:   net.JoinHostPort("127.0.0.1", strconv.Itoa(testsupport.FreePort(t))),
				Username: "chaos", Password: password,
				CAFile: c.dir + "/vcsim-ca.pem",
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(vc.Close)
			// The replicas share the vCenter's config (the front is
			// minicloud's); each has its own minicloud one.
			vsphereConf := writeFile(t, c.dir, "vsphere.yaml", string(vc.CloudConfig(vcsim.TrustCAFile)))
			return perReplica(c, func(i int) string {
				return `- name: vsphere
  type: vsphere
  cloudConfigFile: ` + vsphereConf + `
  instanceCacheFreshness: 5s
- name: minicloud
  type: minicloud
  cloudConfigFile: ` + minicloudConfigFile(t, c, i, "foreignNodes: internalIP\n") + `
defaultNodeProvider: vsphere
defaultLoadBalancerProvider: minicloud
`
			})
		},
		machines:      func(*chaosCloud) machineOps { return vsphereMachines{vc: func() *vcsim.Server { return vc }} },
		providerID:    func(uuid string) string { return "vsphere://" + uuid },
		listing:       minicloudListing,
		loadBalancers: minicloudLoadBalancers,
		// The instance-listing faults are the minicloud provider's, which
		// lists no nodes here.
		cloudFaults: []string{faultErrors, faultThrottle, faultLatency, faultCloudKilled},
		resetFaults: func() { vc.ClearFaults(); vc.SetLatency(0) },
		faults: []providerFault{
			{kind: faultVCenterSOAPFaults, apply: func(context.Context, *faultDriver) api.Faults {
				for _, m := range vcenterReads {
					vc.FailMethod(m, nil, 0)
				}
				return api.Faults{}
			}},
			{kind: faultVCenter503, apply: func(context.Context, *faultDriver) api.Faults {
				for _, m := range vcenterReads {
					vc.FailHTTP(m, 503, 0)
				}
				return api.Faults{}
			}},
			{kind: faultVCenterLatency, apply: func(context.Context, *faultDriver) api.Faults {
				vc.SetLatency(400 * time.Millisecond)
				return api.Faults{}
			}},
			{kind: faultVCenterStopped, apply: func(ctx context.Context, f *faultDriver) api.Faults {
				vc.Stop()
				select {
				case <-ctx.Done():
				case <-time.After(f.step / 2):
				}
				if err := vc.Start(); err != nil {
					t.Errorf("restart the vCenter: %v", err)
				}
				mu.Lock()
				stops++
				mu.Unlock()
				return api.Faults{}
			}},
		},
		secrets: func(*chaosCloud) map[string]string { return map[string]string{"vCenter password": password} },
		report: func(map[string]string) []reportRow {
			mu.Lock()
			defer mu.Unlock()
			reqs := vc.Requests()
			total := 0
			for _, n := range reqs.SOAP {
				total += n
			}
			return []reportRow{{"vCenter", fmt.Sprintf("%d SOAP requests reached it; stopped and restarted %d times", total, stops)}}
		},
	}
	runChaos(t, p)
}

// vsphereMachines are VMs of the simulated vCenter, by name; a machine's ID
// is its BIOS UUID (the provider ID's).
type vsphereMachines struct{ vc func() *vcsim.Server }

func (o vsphereMachines) create(ctx context.Context, name string, _ int) (machineInfo, error) {
	vm, err := o.vc().Create(ctx, vcsim.VMSpec{Name: name})
	if err != nil {
		// The simulator's faults also hit its in-process operations:
		// destroy whatever a failed create may have left, so that the
		// retry starts from no VM of that name.
		if derr := o.vc().Destroy(ctx, name); derr != nil && !errors.Is(derr, vcsim.ErrNotFound) {
			return machineInfo{}, fmt.Errorf("%w (and destroying what it left: %v)", err, derr)
		}
		return machineInfo{}, err
	}
	ip, ok := vmIPv4(vm)
	if !ok {
		return machineInfo{}, fmt.Errorf("VM %s: no IPv4 address in its guest info", name)
	}
	listen, ok := vmPeer.Translate(ip)
	if !ok {
		return machineInfo{}, fmt.Errorf("VM %s: address %s outside %s", name, ip, vmPeer.Network)
	}
	return machineInfo{id: vm.UUID, ip: ip.String(), listenIP: listen.String(), systemUUID: strings.ToUpper(vm.UUID)}, nil
}

func (o vsphereMachines) delete(ctx context.Context, m *machine) error {
	err := o.vc().Destroy(ctx, m.name)
	if errors.Is(err, vcsim.ErrNotFound) {
		return nil // a retry after the destroy went through
	}
	return err
}

func (o vsphereMachines) stop(ctx context.Context, m *machine) error {
	return o.power(ctx, m, o.vc().PowerOff, types.VirtualMachinePowerStatePoweredOff)
}

func (o vsphereMachines) start(ctx context.Context, m *machine) error {
	return o.power(ctx, m, o.vc().PowerOn, types.VirtualMachinePowerStatePoweredOn)
}

// power powers m off or on. A failed attempt may have gone through (the
// task ran, but waiting for it read its state through the property reads
// the faults hit), and the retry would then fail for ever on a VM already
// in that state (InvalidPowerState): a VM found in the state wanted is
// done, as a deletion retried on a VM already gone.
func (o vsphereMachines) power(ctx context.Context, m *machine, op func(context.Context, string) error, want types.VirtualMachinePowerState) error {
	err := op(ctx, m.name)
	if err == nil {
		return nil
	}
	if vm, verr := o.vc().VM(ctx, m.name); verr == nil && vm.PowerState == want {
		return nil
	}
	return err
}

// retryable: the run's own operations go in process; what fails there is
// an injected fault, except a VM that is not there.
func (o vsphereMachines) retryable(err error) bool { return !errors.Is(err, vcsim.ErrNotFound) }

func (o vsphereMachines) exists(ctx context.Context, id string) (bool, error) {
	ids, err := o.list(ctx)
	return ids[id], err
}

func (o vsphereMachines) list(ctx context.Context) (map[string]bool, error) {
	vms, err := o.vc().VMs(ctx)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(vms))
	for _, vm := range vms {
		ids[vm.UUID] = true
	}
	return ids, nil
}

// target: minicloud's load balancers send to foreign nodes' InternalIPs.
func (o vsphereMachines) target(m machine) string { return m.ip }

// vmIPv4 is the first IPv4 address the VM's guest reports.
func vmIPv4(vm vcsim.VM) (netip.Addr, bool) {
	for _, nic := range vm.Guest.NICs {
		for _, s := range nic.IPs {
			if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}
