package conformance

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
)

// Machine is a machine a Driver created.
type Machine struct {
	// Node is the Node a kubelet with --cloud-provider=external would
	// register for the machine: its name, status.nodeInfo.systemUUID and
	// the kubelet's addresses, no provider ID.
	Node *v1.Node
	// Want is the metadata the provider must report for the machine: its
	// provider ID, addresses in order, instance type, zone and region.
	// Empty fields are not checked.
	Want cloudprovider.InstanceMetadata
}

// Driver is what a provider author implements for the kit: the operations
// on the cloud that the cloudprovider interfaces do not offer. Every
// method may be called concurrently with calls to the provider, never
// concurrently with itself.
type Driver interface {
	// CreateMachine creates a running machine whose node name is name.
	CreateMachine(ctx context.Context, name string) (*Machine, error)
	// StopMachine powers the machine off; it keeps existing.
	StopMachine(ctx context.Context, m *Machine) error
	// StartMachine powers a stopped machine on.
	StartMachine(ctx context.Context, m *Machine) error
	// DeleteMachine deletes the machine; deleting one already gone is
	// not an error.
	DeleteMachine(ctx context.Context, m *Machine) error
}

// LoadBalancer is what a LoadBalancerDriver read from the cloud about a
// load balancer. Nil fields mean the driver cannot tell; scenarios that
// need them are skipped.
type LoadBalancer struct {
	// Backends are the node names of the machines that receive traffic.
	Backends []string
	// Ports are the front-end ports.
	Ports []Port
	// HealthCheck is how backends are probed.
	HealthCheck *HealthCheck
	// SourceRanges are the client CIDRs allowed; empty means everyone.
	SourceRanges []string
}

// Port is one front-end port of a load balancer.
type Port struct {
	Protocol v1.Protocol
	Port     int32
	NodePort int32
}

// HealthCheck is a load balancer's probe of its backends.
type HealthCheck struct {
	// Protocol is "TCP" or "HTTP".
	Protocol string
	// Port is the probed node port.
	Port int32
	// Path is the HTTP path.
	Path string
}

// LoadBalancerDriver reads load balancers from the cloud. Implement it
// when the provider supports LoadBalancer.
type LoadBalancerDriver interface {
	// DescribeLoadBalancer returns the load balancer the provider named
	// name, or nil when there is none.
	DescribeLoadBalancer(ctx context.Context, name string) (*LoadBalancer, error)
	// Unsupported lists Service settings the provider rejects, each with
	// the field its error must name.
	Unsupported() []Unsupported
}

// Unsupported is a Service setting the provider must reject.
type Unsupported struct {
	// Field is the path the error names, e.g. "spec.loadBalancerIP".
	Field string
	// Apply changes a valid Service into one with the setting.
	Apply func(*v1.Service)
}

// TrafficDriver checks that traffic through a load balancer reaches the
// nodes. Implement it when the test machine can reach the cloud's
// load balancers and the machines.
type TrafficDriver interface {
	// ServeNodePort makes each machine answer TCP connections on nodePort
	// with its node name, as kube-proxy and a pod would, until stop.
	ServeNodePort(ctx context.Context, machines []*Machine, nodePort int32) (stop func(), err error)
	// Reach connects to the load balancer's ingress on port and returns
	// the node name that answered.
	Reach(ctx context.Context, ingress v1.LoadBalancerIngress, port int32) (string, error)
}

// FaultDriver makes the cloud fail. Implement it when the cloud (or a
// simulator of it) can be made to answer every request with an error.
type FaultDriver interface {
	// BreakCloud makes every cloud request fail (a server error or a
	// refused connection) until the returned restore is called.
	BreakCloud(ctx context.Context) (restore func(context.Context) error, err error)
}

// RouteDriver says what the cloud's routes support. Implement it when the
// provider supports Routes; without it routes are tested for IPv4 only.
type RouteDriver interface {
	// DualStack reports whether a node can have an IPv4 and an IPv6 route.
	DualStack() bool
}

// Target is a provider under test: its registered name, cloud config and
// the driver of its cloud.
type Target struct {
	// Name names the run in reports (tables, JUnit suites, matrix
	// columns); default Provider. A provider checked several ways (in
	// process, as a plugin) needs one name per way.
	Name string
	// Provider is the name the provider registered with
	// k8s.io/cloud-provider's RegisterCloudProvider.
	Provider string
	// CloudConfig is the provider's --cloud-config.
	CloudConfig []byte
	// Driver operates the cloud.
	Driver Driver
	// Close releases what the driver started; may be nil.
	Close func()
}

// DriverOptions is what a DriverFactory is given.
type DriverOptions struct {
	// CloudConfig, when empty, asks the driver to start a cloud of its own
	// (a simulator); otherwise the driver reaches the cloud it names.
	CloudConfig []byte
	// KubeConfig is the control plane of the run, for drivers that serve
	// the provider themselves (as a plugin) and hand it to the provider's
	// Initialize.
	KubeConfig *rest.Config
}

// DriverFactory makes a Target for a driver registered by name.
type DriverFactory func(ctx context.Context, o DriverOptions) (*Target, error)

var drivers = map[string]DriverFactory{}

// RegisterDriver makes a driver available to `stratus conformance
// --driver name`. Call it from an init function; registering a name twice
// panics.
func RegisterDriver(name string, f DriverFactory) {
	if _, dup := drivers[name]; dup {
		panic("conformance: driver " + name + " registered twice")
	}
	drivers[name] = f
}

// Drivers returns the names of the registered drivers.
func Drivers() []string {
	return slices.Sorted(maps.Keys(drivers))
}

// NewTarget makes the Target of the registered driver name.
func NewTarget(ctx context.Context, name string, o DriverOptions) (*Target, error) {
	f, ok := drivers[name]
	if !ok {
		return nil, &UnknownDriverError{Name: name, Known: Drivers()}
	}
	return f(ctx, o)
}

// UnknownDriverError is returned by NewTarget for a name no driver
// registered.
type UnknownDriverError struct {
	Name  string
	Known []string
}

// Error names the driver and the registered ones.
func (e *UnknownDriverError) Error() string {
	return fmt.Sprintf("unknown conformance driver %q (registered: %s)", e.Name, strings.Join(e.Known, ", "))
}
