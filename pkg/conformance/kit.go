package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"slices"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/controller-manager/pkg/clientbuilder"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// DefaultTimeout is how long a scenario waits for the cloud to reach a
// state (a stopped machine reported shut down, a load balancer active).
const DefaultTimeout = 90 * time.Second

// DefaultClusterName is the cluster name the provider is called with. It is
// on purpose not the manager's default ("kubernetes"): the load balancers and
// routes a run creates on a real cloud are then never taken for those of a
// cluster that runs with the manager's default name.
const DefaultClusterName = "conformance"

// Config says what Run checks.
type Config struct {
	// Name names the run in the Report (default Provider).
	Name string
	// Provider is the registered provider name (required).
	Provider string
	// CloudConfig is the provider's cloud config.
	CloudConfig []byte
	// Driver operates the provider's cloud (required). It may also
	// implement LoadBalancerDriver, TrafficDriver, FaultDriver and
	// RouteDriver.
	Driver Driver
	// KubeConfig reaches the control plane (required): the provider's
	// Initialize gets a client builder for it, the kit registers the
	// machines' Nodes there, and the end-to-end scenarios run stratus's
	// controllers against it.
	KubeConfig *rest.Config
	// ClusterName is passed to load balancer and route calls (default
	// DefaultClusterName). Runs sharing one cloud need different names.
	ClusterName string
	// Focus, when set, runs only the scenarios whose name it matches.
	Focus *regexp.Regexp
	// Skip, when set, skips the scenarios whose name it matches.
	Skip *regexp.Regexp
	// Timeout bounds each wait of a scenario (default DefaultTimeout).
	Timeout time.Duration
	// Manager is the cloud controller manager the end-to-end scenarios
	// run, and through which a provider with Instances and Zones but no
	// InstancesV2 is read (pkg/app.Manager is stratus-ccm's). Without
	// one the end-to-end scenarios are skipped, and so are the instance
	// scenarios of such a provider.
	Manager Manager
	// ManagerLog receives the logs of the end-to-end scenarios'
	// manager (default: discarded).
	ManagerLog logr.Logger
	// Progress, when set, is called after each scenario.
	Progress func(Result)
}

// Status is the outcome of a scenario.
type Status string

// The outcomes of a scenario.
const (
	Passed  Status = "pass"
	Failed  Status = "fail"
	Skipped Status = "skip"
)

// Result is what one scenario found.
type Result struct {
	// Name is the scenario's name, "group/name".
	Name string
	// Group is the scenario group (instances, loadbalancers, ...).
	Group string
	// Doc says what the scenario checks.
	Doc string
	// Status is pass, fail or skip.
	Status Status
	// Message is, for a failure, what was expected and what came; for a
	// skip, the reason.
	Message string
	// Duration is how long the scenario ran.
	Duration time.Duration
}

// Report is the outcome of a Run.
type Report struct {
	// Name is Config.Name: the run's name in tables, JUnit suites and
	// matrix columns.
	Name string
	// Provider and Driver name what ran.
	Provider, Driver string
	// Results are in scenario order.
	Results []Result
}

// Failed reports whether any scenario failed.
func (r *Report) Failed() bool {
	for _, res := range r.Results {
		if res.Status == Failed {
			return true
		}
	}
	return false
}

// Count returns how many scenarios ended with s.
func (r *Report) Count(s Status) int {
	n := 0
	for _, res := range r.Results {
		if res.Status == s {
			n++
		}
	}
	return n
}

// Run builds the provider named in cfg from its cloud config, initializes
// it, and runs every scenario that Focus and Skip select, skipping those
// whose needs the provider or driver do not meet. An error means the run
// could not start (bad Config, unknown provider); scenario failures are in
// the Report. The e2e scenarios run stratus-ccm in this process, and
// controller-runtime allows one controller of a name per process, so at
// most one Run per process may include them.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	raw, err := cloudprovider.GetCloudProvider(cfg.Provider, bytes.NewReader(cfg.CloudConfig))
	if err != nil {
		return nil, fmt.Errorf("conformance: build provider %s: %w", cfg.Provider, err)
	}
	if raw == nil {
		return nil, fmt.Errorf("conformance: Provider: no provider is registered as %q", cfg.Provider)
	}
	kube, err := kubernetes.NewForConfig(cfg.KubeConfig)
	if err != nil {
		return nil, fmt.Errorf("conformance: KubeConfig: %w", err)
	}
	stop := make(chan struct{})
	defer close(stop)
	raw.Initialize(clientbuilder.SimpleControllerClientBuilder{ClientConfig: cfg.KubeConfig}, stop)

	k := newKit(&cfg, raw, kube)
	defer k.close()
	rep := &Report{Name: cfg.Name, Provider: cfg.Provider, Driver: fmt.Sprintf("%T", cfg.Driver)}
	for _, s := range Scenarios() {
		if cfg.Focus != nil && !cfg.Focus.MatchString(s.Name) {
			continue
		}
		res := Result{Name: s.Name, Group: s.Group(), Doc: s.Doc}
		switch {
		case cfg.Skip != nil && cfg.Skip.MatchString(s.Name):
			res.Status, res.Message = Skipped, "matches --skip"
		case k.missing(s.Needs) != "":
			res.Status, res.Message = Skipped, k.missing(s.Needs)
		default:
			start := time.Now()
			err := k.run(ctx, s)
			res.Duration = time.Since(start)
			var skip *skipError
			switch {
			case err == nil:
				res.Status = Passed
			case errors.As(err, &skip):
				res.Status, res.Message = Skipped, skip.reason
			default:
				res.Status, res.Message = Failed, err.Error()
			}
		}
		rep.Results = append(rep.Results, res)
		if cfg.Progress != nil {
			cfg.Progress(res)
		}
		if ctx.Err() != nil {
			return rep, fmt.Errorf("conformance: %w", ctx.Err())
		}
	}
	return rep, nil
}

func (c *Config) validate() error {
	switch {
	case c.Provider == "":
		return errors.New("conformance: Provider: empty; want a registered provider name")
	case c.Driver == nil:
		return errors.New("conformance: Driver: nil; want the driver of the provider's cloud")
	case c.KubeConfig == nil:
		return errors.New("conformance: KubeConfig: nil; want a control plane")
	}
	if c.ClusterName == "" {
		c.ClusterName = DefaultClusterName
	}
	if c.Name == "" {
		c.Name = c.Provider
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	return nil
}

// kit is the provider, its capabilities and the driver, shared by the
// scenarios of one Run.
type kit struct {
	cfg    *Config
	raw    cloudprovider.Interface
	kube   kubernetes.Interface
	runID  string
	serial int

	inst     cloudprovider.InstancesV2 // nil without InstancesV2 or Instances + Zones
	lister   stratus.InstanceLister
	watcher  stratus.InstanceWatcher
	lb       cloudprovider.LoadBalancer
	lbLister stratus.LoadBalancerLister
	routes   cloudprovider.Routes

	validator stratus.LoadBalancerValidator
	lbCaps    *stratus.LoadBalancerCapabilities // nil when not declared
	pools     stratus.BackendPools              // nil when not used
	digester  stratus.BackendsDigester          // nil when not implemented

	lbd     LoadBalancerDriver
	traffic TrafficDriver
	faults  FaultDriver
	rd      RouteDriver

	e2e *e2eManager // started by the first end-to-end scenario
}

func newKit(cfg *Config, raw cloudprovider.Interface, kube kubernetes.Interface) *kit {
	b := make([]byte, 3)
	rand.Read(b)
	k := &kit{cfg: cfg, raw: raw, kube: kube, runID: hex.EncodeToString(b)}
	if v2, ok := raw.InstancesV2(); ok && v2 != nil {
		k.inst = v2
		k.lister, _ = v2.(stratus.InstanceLister)
	} else if _, ok := raw.Instances(); ok {
		if _, ok := raw.Zones(); ok && cfg.Manager != nil {
			// The manager assembles InstancesV2 answers from Instances
			// and Zones with upstream's fallbacks; hiding the listing
			// keeps its instance cache out of the answers under test.
			k.inst = cfg.Manager.InstancesV2(cfg.Provider, interfaceOnly{raw})
		}
	}
	if l, ok := raw.(stratus.InstanceLister); ok {
		k.lister = l
	}
	k.watcher, _ = k.lister.(stratus.InstanceWatcher)
	if lb, ok := raw.LoadBalancer(); ok && lb != nil {
		k.lb = lb
		k.lbLister, _ = lb.(stratus.LoadBalancerLister)
	}
	if l, ok := raw.(stratus.LoadBalancerLister); ok {
		k.lbLister = l
	}
	if d, ok := raw.(stratus.BackendsDigester); ok {
		k.digester = d
	} else if k.lb != nil {
		k.digester, _ = k.lb.(stratus.BackendsDigester)
	}
	k.validator, k.lbCaps = validation(raw, k.lb)
	if bp, ok := raw.(stratus.BackendPooler); ok {
		if pools, ok := bp.BackendPools(); ok {
			k.pools = pools
		}
	}
	if r, ok := raw.Routes(); ok && r != nil {
		k.routes = r
	}
	k.lbd, _ = cfg.Driver.(LoadBalancerDriver)
	k.traffic, _ = cfg.Driver.(TrafficDriver)
	k.faults, _ = cfg.Driver.(FaultDriver)
	k.rd, _ = cfg.Driver.(RouteDriver)
	return k
}

func (k *kit) close() {
	if k.e2e != nil {
		k.e2e.stop()
	}
}

// interfaceOnly hides every method of a provider beyond
// cloudprovider.Interface.
type interfaceOnly struct{ cloudprovider.Interface }

// run runs one scenario and then its cleanups, turning a panic into a
// failure.
func (k *kit) run(ctx context.Context, s Scenario) (err error) {
	e := &env{kit: k, scenario: s.Name}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
		if cerr := e.cleanup(); cerr != nil && err == nil {
			err = fmt.Errorf("cleanup: %w", cerr)
		}
	}()
	return s.run(ctx, e)
}

// missing says why a scenario with needs cannot run, or "" when it can.
func (k *kit) missing(needs []Need) string {
	for _, n := range needs {
		if r := k.lacks(n); r != "" {
			return r
		}
	}
	return ""
}

// Need is a capability a scenario needs from the provider or the driver.
type Need int

// The capabilities scenarios need.
const (
	NeedInstances Need = iota
	NeedInstanceLister
	NeedInstanceWatcher
	NeedLoadBalancer
	NeedLoadBalancerLister
	NeedLoadBalancerDriver
	NeedRoutes
	NeedDualStack
	NeedTraffic
	NeedFaults
	NeedLoadBalancerValidator
	NeedLoadBalancerCapabilities
	NeedManager
	NeedBackendPools
	NeedBackendsDigester
)

func (k *kit) lacks(n Need) string {
	switch n {
	case NeedInstances:
		if k.inst == nil {
			if k.cfg.Manager == nil && k.hasInstancesV1() {
				return "the provider has Instances + Zones but no InstancesV2, and no Manager (Config.Manager) reads them"
			}
			return "the provider supports neither InstancesV2 nor Instances + Zones"
		}
	case NeedInstanceLister:
		if k.lister == nil {
			return "the provider does not implement pkg/stratus.InstanceLister"
		}
	case NeedInstanceWatcher:
		if k.watcher == nil {
			return "the provider does not implement pkg/stratus.InstanceWatcher"
		}
	case NeedLoadBalancer:
		if k.lb == nil {
			return "the provider does not support LoadBalancer"
		}
	case NeedLoadBalancerLister:
		if k.lb != nil && k.lbLister == nil {
			return "the provider does not implement pkg/stratus.LoadBalancerLister"
		}
	case NeedLoadBalancerDriver:
		if k.lb != nil && k.lbd == nil {
			return "the driver does not implement conformance.LoadBalancerDriver"
		}
	case NeedRoutes:
		if k.routes == nil {
			return "the provider does not support Routes"
		}
	case NeedDualStack:
		if k.routes != nil && (k.rd == nil || !k.rd.DualStack()) {
			return "the driver does not report dual-stack routes (conformance.RouteDriver)"
		}
	case NeedTraffic:
		if k.traffic == nil {
			return "the driver cannot check traffic (conformance.TrafficDriver)"
		}
	case NeedFaults:
		if k.faults == nil {
			return "the driver cannot make the cloud fail (conformance.FaultDriver)"
		}
	case NeedLoadBalancerValidator:
		if k.lb != nil && k.validator == nil {
			return "the provider does not implement pkg/stratus.LoadBalancerValidator"
		}
	case NeedManager:
		if k.cfg.Manager == nil {
			return "no manager to run (conformance.Config.Manager)"
		}
	case NeedBackendsDigester:
		if k.lb != nil && k.digester == nil {
			return "the provider does not implement pkg/stratus.BackendsDigester"
		}
	case NeedBackendPools:
		if k.lb != nil && k.pools == nil {
			return "the provider does not use backend pools (pkg/stratus.BackendPooler)"
		}
	case NeedLoadBalancerCapabilities:
		if k.lb != nil && k.lbCaps == nil {
			return "the provider does not declare pkg/stratus.LoadBalancerCapabilities"
		}
	}
	return ""
}

// hasInstancesV1 reports whether the provider has Instances and Zones.
func (k *kit) hasInstancesV1() bool {
	_, inst := k.raw.Instances()
	_, zones := k.raw.Zones()
	return inst && zones
}

// skipError ends a scenario as skipped.
type skipError struct{ reason string }

func (e *skipError) Error() string { return "skipped: " + e.reason }

// skip ends a scenario as skipped with reason.
func skip(format string, args ...any) error { return &skipError{reason: fmt.Sprintf(format, args...)} }

// env is one scenario's view of the kit, with its cleanups.
type env struct {
	*kit
	scenario string
	cleanups []func(context.Context) error
}

// later registers f to run after the scenario, last registered first.
func (e *env) later(f func(context.Context) error) { e.cleanups = append(e.cleanups, f) }

func (e *env) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.Timeout)
	defer cancel()
	var errs []error
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		errs = append(errs, e.cleanups[i](ctx))
	}
	return errors.Join(errs...)
}

// name returns a fresh name for a machine or Service of this run.
func (e *env) name() string {
	e.serial++
	return fmt.Sprintf("cf-%s-%d", e.runID, e.serial)
}

// eventually polls cond until it returns nil, failing with its last error
// after the configured timeout.
func (e *env) eventually(ctx context.Context, cond func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, e.cfg.Timeout, true, func(ctx context.Context) (bool, error) {
		err := cond(ctx)
		if err != nil && ctx.Err() != nil && last != nil {
			// The deadline cut this attempt short; the previous answer
			// says more.
			return false, nil
		}
		last = err
		var s *skipError
		if errors.As(last, &s) {
			return false, last
		}
		return last == nil, nil
	})
	var s *skipError
	if errors.As(err, &s) {
		return err
	}
	if err != nil && last != nil {
		return fmt.Errorf("%w (still after %s)", last, e.cfg.Timeout)
	}
	return err
}

// machine creates a running machine, deleted after the scenario.
func (e *env) machine(ctx context.Context) (*Machine, error) {
	name := e.name()
	m, err := e.cfg.Driver.CreateMachine(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("driver: create machine %s: %w", name, err)
	}
	e.later(func(ctx context.Context) error {
		if err := e.cfg.Driver.DeleteMachine(ctx, m); err != nil {
			return fmt.Errorf("driver: delete machine %s: %w", name, err)
		}
		return nil
	})
	return m, nil
}

// initialized is the machine's Node as stratus leaves it after
// initialization: the provider ID and addresses the provider reports.
func initialized(m *Machine) *v1.Node {
	n := m.Node.DeepCopy()
	if m.Want.ProviderID != "" {
		n.Spec.ProviderID = m.Want.ProviderID
	}
	if len(m.Want.NodeAddresses) > 0 {
		n.Status.Addresses = initializedAddresses(m)
	}
	return n
}

// initializedAddresses are the addresses the node controller (stratus's,
// like upstream's) gives the machine's Node: the provider's, then the
// kubelet's host name when the provider reports none.
func initializedAddresses(m *Machine) []v1.NodeAddress {
	addrs := append([]v1.NodeAddress(nil), m.Want.NodeAddresses...)
	if slices.ContainsFunc(addrs, func(a v1.NodeAddress) bool { return a.Type == v1.NodeHostName }) {
		return addrs
	}
	for _, a := range m.Node.Status.Addresses {
		if a.Type == v1.NodeHostName {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// expected is the failure "expected want, got got" for what.
func expected(what string, want, got any) error {
	return fmt.Errorf("%s: expected %v, got %v", what, want, got)
}
