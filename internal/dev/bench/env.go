package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/vcsim"
)

// manager is one side of the comparison.
type manager string

const (
	upstream   manager = "upstream"
	stratusCCM manager = "stratus"
)

// env is one scenario run: a control plane, a minicloud and a manager.
type env struct {
	kube  kubernetes.Interface
	cloud *client.Client
	// mgrCloud uses the manager's token; it only reads the manager's stats.
	mgrCloud *client.Client
	// mgr is the manager process (for its RSS).
	mgr *exec.Cmd
	// instances by name, as created.
	mu        sync.Mutex
	instances map[string]*api.Instance
	// vc is the simulated vCenter of a vSphere scenario, vms its VMs by name.
	vc  *vcsim.Server
	vms map[string]vcsim.VM
	// cloudURL is minicloud's; managerToken and harnessToken its two tokens.
	cloudURL, managerToken, harnessToken string
	// providerID is the provider ID of an instance's Node, as the manager
	// under test writes it (minicloud://, or openstack:/// for the dialect).
	providerID func(instanceID string) string
	// floatingPool holds the OpenStack dialect's floating IPs (invalid for
	// the other clouds).
	floatingPool netip.Prefix
	// auditLog is the API server's audit log; countsSince is when the
	// counts were last reset (resetCounts).
	auditLog    string
	countsSince time.Time
	// audit follows auditLog for waitQuiet; quietWait is how long the last
	// waitQuiet waited.
	audit     *auditTail
	quietWait time.Duration
	// profiler reads the manager's heap profile when the scenario takes one
	// (nil otherwise), into <profileName>.heap.pb.gz; heapTop is the
	// profile's summary once taken.
	profiler    *profiler
	profileName string
	heapTop     string
	// apiBefore is the API server's /metrics at the last resetCounts (nil
	// before the first, or when it could not be read).
	apiBefore *apiserverSnapshot
}

// resetCounts zeroes the cloud's call counts and starts counting the
// manager's Kubernetes API requests anew.
func (e *env) resetCounts(ctx context.Context) error {
	e.countsSince = time.Now()
	e.apiBefore = nil
	if e.kube != nil {
		snap, err := scrapeAPIServer(ctx, e.kube)
		if err != nil {
			return err
		}
		e.apiBefore = &snap
	}
	if e.cloud == nil {
		return nil
	}
	return e.cloud.ResetStats(ctx)
}

// poll is how often scenarios look at the cluster while waiting.
const poll = 200 * time.Millisecond

func (e *env) until(ctx context.Context, what string, cond wait.ConditionWithContextFunc) error {
	if err := wait.PollUntilContextCancel(ctx, poll, true, cond); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}
