package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/pkg/stratus"
	pb "github.com/stratus-ccm/stratus/proto/stratus/provider/v1"
)

// ProtocolVersion is the version of the provider protocol this package speaks
// (proto/stratus/provider/v1).
const ProtocolVersion = 1

// maxMessageSize bounds one message each way. Listings of thousands of
// instances and EnsureLoadBalancer with thousands of nodes exceed gRPC's
// default of 4 MiB.
const maxMessageSize = 64 << 20

// ErrProtocol is wrapped by every error that says the plugin broke the
// protocol: a reply without a required field, undecodable objects, a method
// it claims but does not implement, changed capabilities. Such errors are
// never transient and never mean "not found".
var ErrProtocol = errors.New("plugin protocol violation")

func protocolErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// wireNode is the Node as it crosses the wire: the fields providers use.
// Images, volumes and managed fields are dropped because they are large
// and no provider reads them.
func wireNode(n *v1.Node) *v1.Node {
	c := n.DeepCopy()
	c.ManagedFields = nil
	c.Status.Images = nil
	c.Status.VolumesInUse = nil
	c.Status.VolumesAttached = nil
	return c
}

func encodeNode(n *v1.Node) ([]byte, error) {
	if n == nil {
		return nil, errors.New("encode node: nil")
	}
	b, err := json.Marshal(wireNode(n))
	if err != nil {
		return nil, fmt.Errorf("encode node %s: %w", n.Name, err)
	}
	return b, nil
}

func encodeNodes(nodes []*v1.Node) ([][]byte, error) {
	out := make([][]byte, 0, len(nodes))
	for _, n := range nodes {
		b, err := encodeNode(n)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// decodeObject decodes the Kubernetes JSON of field into obj.
func decodeObject(field string, b []byte, obj any) error {
	if len(b) == 0 {
		return fmt.Errorf("%s: required", field)
	}
	if err := json.Unmarshal(b, obj); err != nil {
		return fmt.Errorf("%s: not a Kubernetes JSON object: %w", field, err)
	}
	return nil
}

func encodeService(svc *v1.Service) ([]byte, error) {
	if svc == nil {
		return nil, errors.New("encode service: nil")
	}
	c := svc.DeepCopy()
	c.ManagedFields = nil
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return b, nil
}

// encodeStatus encodes a load-balancer status; nil stays unset.
func encodeStatus(s *v1.LoadBalancerStatus) ([]byte, error) {
	if s == nil {
		return nil, nil
	}
	return json.Marshal(s)
}

// decodeStatus decodes an optional load-balancer status.
func decodeStatus(field string, b []byte) (*v1.LoadBalancerStatus, error) {
	if b == nil {
		return nil, nil
	}
	s := &v1.LoadBalancerStatus{}
	if err := decodeObject(field, b, s); err != nil {
		return nil, err
	}
	return s, nil
}

func toAddresses(in []v1.NodeAddress) []*pb.NodeAddress {
	out := make([]*pb.NodeAddress, 0, len(in))
	for _, a := range in {
		out = append(out, &pb.NodeAddress{Type: proto.String(string(a.Type)), Address: proto.String(a.Address)})
	}
	return out
}

func fromAddresses(field string, in []*pb.NodeAddress) ([]v1.NodeAddress, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]v1.NodeAddress, 0, len(in))
	for i, a := range in {
		if a.Type == nil || a.Address == nil {
			return nil, fmt.Errorf("%s[%d]: type and address are required", field, i)
		}
		out = append(out, v1.NodeAddress{Type: v1.NodeAddressType(a.GetType()), Address: a.GetAddress()})
	}
	return out, nil
}

func toMetadata(md *cloudprovider.InstanceMetadata) *pb.InstanceMetadata {
	if md == nil {
		return nil
	}
	return &pb.InstanceMetadata{
		ProviderId:       proto.String(md.ProviderID),
		InstanceType:     proto.String(md.InstanceType),
		NodeAddresses:    toAddresses(md.NodeAddresses),
		Zone:             proto.String(md.Zone),
		Region:           proto.String(md.Region),
		AdditionalLabels: md.AdditionalLabels,
	}
}

func fromMetadata(field string, m *pb.InstanceMetadata) (*cloudprovider.InstanceMetadata, error) {
	if m == nil {
		return nil, nil
	}
	addrs, err := fromAddresses(field+".node_addresses", m.NodeAddresses)
	if err != nil {
		return nil, err
	}
	md := &cloudprovider.InstanceMetadata{
		ProviderID:    m.GetProviderId(),
		InstanceType:  m.GetInstanceType(),
		NodeAddresses: addrs,
		Zone:          m.GetZone(),
		Region:        m.GetRegion(),
	}
	if len(m.AdditionalLabels) > 0 {
		md.AdditionalLabels = m.AdditionalLabels
	}
	return md, nil
}

func toInstance(in stratus.Instance) *pb.Instance {
	out := &pb.Instance{
		Name:        proto.String(in.Name),
		Metadata:    toMetadata(&in.Metadata),
		Shutdown:    proto.Bool(in.Shutdown),
		Hostnames:   in.Hostnames,
		SystemUuids: in.SystemUUIDs,
	}
	if in.MetadataErr != nil {
		out.MetadataError = toError(in.MetadataErr)
	}
	return out
}

func fromInstance(field string, in *pb.Instance) (stratus.Instance, error) {
	if in.Name == nil || in.Shutdown == nil || in.Metadata == nil || in.Metadata.ProviderId == nil {
		return stratus.Instance{}, fmt.Errorf("%s: name, shutdown and metadata.provider_id are required", field)
	}
	md, err := fromMetadata(field+".metadata", in.Metadata)
	if err != nil {
		return stratus.Instance{}, err
	}
	out := stratus.Instance{
		Name:        in.GetName(),
		Metadata:    *md,
		Shutdown:    in.GetShutdown(),
		Hostnames:   in.Hostnames,
		SystemUUIDs: in.SystemUuids,
	}
	if in.MetadataError != nil {
		out.MetadataErr = fromError(in.MetadataError)
	}
	return out, nil
}

func toLoadBalancerRef(r stratus.LoadBalancerRef) (*pb.LoadBalancerRef, error) {
	status, err := encodeStatus(r.Status)
	if err != nil {
		return nil, fmt.Errorf("encode status of load balancer %s: %w", r.Name, err)
	}
	return &pb.LoadBalancerRef{
		Name:             proto.String(r.Name),
		ServiceNamespace: proto.String(r.ServiceNamespace),
		ServiceName:      proto.String(r.ServiceName),
		ServiceUid:       proto.String(string(r.ServiceUID)),
		Status:           status,
		Provisioning:     proto.Bool(r.Provisioning),
		Backends:         proto.String(r.Backends),
	}, nil
}

func fromLoadBalancerRef(field string, r *pb.LoadBalancerRef) (stratus.LoadBalancerRef, error) {
	if r.Name == nil || r.ServiceNamespace == nil || r.ServiceName == nil || r.ServiceUid == nil {
		return stratus.LoadBalancerRef{}, fmt.Errorf("%s: name, service_namespace, service_name and service_uid are required", field)
	}
	status, err := decodeStatus(field+".status", r.Status)
	if err != nil {
		return stratus.LoadBalancerRef{}, err
	}
	return stratus.LoadBalancerRef{
		Name:             r.GetName(),
		ServiceNamespace: r.GetServiceNamespace(),
		ServiceName:      r.GetServiceName(),
		ServiceUID:       types.UID(r.GetServiceUid()),
		Status:           status,
		Provisioning:     r.GetProvisioning(),
		Backends:         r.GetBackends(),
	}, nil
}

func toRoute(r *cloudprovider.Route) *pb.Route {
	if r == nil {
		return nil
	}
	return &pb.Route{
		Name:                proto.String(r.Name),
		TargetNode:          proto.String(string(r.TargetNode)),
		EnableNodeAddresses: proto.Bool(r.EnableNodeAddresses),
		TargetNodeAddresses: toAddresses(r.TargetNodeAddresses),
		DestinationCidr:     proto.String(r.DestinationCIDR),
		Blackhole:           proto.Bool(r.Blackhole),
	}
}

func fromRoute(field string, r *pb.Route) (*cloudprovider.Route, error) {
	if r == nil {
		return nil, fmt.Errorf("%s: required", field)
	}
	if r.Name == nil || r.TargetNode == nil || r.DestinationCidr == nil {
		return nil, fmt.Errorf("%s: name, target_node and destination_cidr are required", field)
	}
	addrs, err := fromAddresses(field+".target_node_addresses", r.TargetNodeAddresses)
	if err != nil {
		return nil, err
	}
	return &cloudprovider.Route{
		Name:                r.GetName(),
		TargetNode:          types.NodeName(r.GetTargetNode()),
		EnableNodeAddresses: r.GetEnableNodeAddresses(),
		TargetNodeAddresses: addrs,
		DestinationCIDR:     r.GetDestinationCidr(),
		Blackhole:           r.GetBlackhole(),
	}, nil
}

// toError classifies a provider error as the Error detail, in the order the
// cloud layer classifies outcomes.
func toError(err error) *pb.Error {
	e := &pb.Error{Kind: pb.Error_KIND_PLAIN, Message: proto.String(err.Error())}
	var throttled *stratus.ThrottledError
	var retry *cloudproviderapi.RetryError
	switch {
	case errors.As(err, &throttled):
		e.Kind = pb.Error_KIND_THROTTLED
		if throttled.RetryAfter > 0 {
			e.RetryAfter = durationpb.New(throttled.RetryAfter)
		}
	case errors.As(err, &retry):
		e.Kind = pb.Error_KIND_RETRY
		e.RetryAfter = durationpb.New(retry.RetryAfter())
	case errors.Is(err, cloudprovider.InstanceNotFound):
		e.Kind = pb.Error_KIND_INSTANCE_NOT_FOUND
	case errors.Is(err, cloudprovider.NotImplemented):
		e.Kind = pb.Error_KIND_NOT_IMPLEMENTED
	case errors.Is(err, cloudprovider.ImplementedElsewhere):
		e.Kind = pb.Error_KIND_IMPLEMENTED_ELSEWHERE
	case stratus.IsTransient(err):
		e.Kind = pb.Error_KIND_TRANSIENT
	}
	return e
}

// errorCodes are the gRPC codes of the error kinds, for tools that only read
// the code.
var errorCodes = map[pb.Error_Kind]codes.Code{
	pb.Error_KIND_PLAIN:                 codes.Unknown,
	pb.Error_KIND_INSTANCE_NOT_FOUND:    codes.NotFound,
	pb.Error_KIND_NOT_IMPLEMENTED:       codes.Unimplemented,
	pb.Error_KIND_IMPLEMENTED_ELSEWHERE: codes.FailedPrecondition,
	pb.Error_KIND_RETRY:                 codes.Aborted,
	pb.Error_KIND_THROTTLED:             codes.ResourceExhausted,
	pb.Error_KIND_TRANSIENT:             codes.Unavailable,
}

// toStatus is a provider error as the gRPC status of the reply.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	e := toError(err)
	code := errorCodes[e.Kind]
	if errors.Is(err, context.DeadlineExceeded) && e.Kind == pb.Error_KIND_PLAIN {
		code = codes.DeadlineExceeded
	}
	st, derr := status.New(code, err.Error()).WithDetails(e)
	if derr != nil {
		return status.Error(code, err.Error())
	}
	return st.Err()
}

// remoteError is a provider error rebuilt on the manager's side: the
// provider's message, unwrapping to the marker that gives it its meaning.
type remoteError struct {
	msg    string
	marker error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.marker }

// fromError rebuilds a provider error from its Error detail.
func fromError(e *pb.Error) error {
	msg := e.GetMessage()
	var after time.Duration
	if e.RetryAfter != nil {
		after = e.RetryAfter.AsDuration()
	}
	var marker error
	switch e.GetKind() {
	case pb.Error_KIND_INSTANCE_NOT_FOUND:
		marker = cloudprovider.InstanceNotFound
	case pb.Error_KIND_NOT_IMPLEMENTED:
		marker = cloudprovider.NotImplemented
	case pb.Error_KIND_IMPLEMENTED_ELSEWHERE:
		marker = cloudprovider.ImplementedElsewhere
	case pb.Error_KIND_RETRY:
		return cloudproviderapi.NewRetryError(msg, after)
	case pb.Error_KIND_THROTTLED:
		marker = &stratus.ThrottledError{RetryAfter: after}
	case pb.Error_KIND_TRANSIENT:
		return stratus.Transient(errors.New(msg))
	default:
		return errors.New(msg)
	}
	// A provider that returned the bare sentinel gets the sentinel itself:
	// k8s.io/cloud-provider compares some of them with == (as
	// GetInstanceProviderID does with InstanceNotFound).
	if msg == marker.Error() {
		return marker
	}
	return &remoteError{msg: msg, marker: marker}
}
