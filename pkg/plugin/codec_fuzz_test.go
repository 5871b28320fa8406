package plugin

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/stratus-ccm/stratus/proto/stratus/provider/v1"
)

// decoder is one message the other side of the protocol sends, decoded the
// way the manager (replies) or the plugin (requests) decodes it.
type decoder func(b []byte) error

// decoders are every message whose content the codec turns into provider
// values, by the message's first byte in the fuzz input.
var decoders = []decoder{
	// Manager side: replies of the plugin.
	func(b []byte) error {
		var m pb.Capabilities
		if err := proto.Unmarshal(b, &m); err != nil {
			return err
		}
		return checkCapabilities(&m)
	},
	func(b []byte) error {
		var m pb.InstanceMetadataResponse
		if err := proto.Unmarshal(b, &m); err != nil {
			return err
		}
		md, err := fromMetadata("metadata", m.Metadata)
		if err != nil || md == nil {
			return err
		}
		// Re-encoded metadata decodes to the same value.
		again, err := fromMetadata("metadata", toMetadata(md))
		if err != nil {
			return fmt.Errorf("re-decoding %+v: %w", md, err)
		}
		if !reflect.DeepEqual(again, md) {
			return fmt.Errorf("metadata round trip changed %+v to %+v: %w", md, again, errRoundTrip)
		}
		return nil
	},
	func(b []byte) error {
		var m pb.ListInstancesResponse
		if err := proto.Unmarshal(b, &m); err != nil {
			return err
		}
		for i, in := range m.Instances {
			out, err := fromInstance(fmt.Sprintf("instances[%d]", i), in)
			if err != nil {
				return err
			}
			again, err := fromInstance("again", toInstance(out))
			if err != nil {
				return fmt.Errorf("re-decoding %+v: %w", out, err)
			}
			// Errors are rebuilt, not kept: compare their messages.
			if (out.MetadataErr == nil) != (again.MetadataErr == nil) ||
				(out.MetadataErr != nil && out.MetadataErr.Error() != again.MetadataErr.Error()) {
				return fmt.Errorf("instance error round trip changed %v to %v: %w", out.MetadataErr, again.MetadataErr, errRoundTrip)
			}
			out.MetadataErr, again.MetadataErr = nil, nil
			if !reflect.DeepEqual(again, out) {
				return fmt.Errorf("instance round trip changed %+v to %+v: %w", out, again, errRoundTrip)
			}
		}
		return nil
	},
	func(b []byte) error {
		var m pb.ListLoadBalancersResponse
		if err := proto.Unmarshal(b, &m); err != nil {
			return err
		}
		for i, r := range m.LoadBalancers {
			ref, err := fromLoadBalancerRef(fmt.Sprintf("load_balancers[%d]", i), r)
			if err != nil {
				return err
			}
			wire, err := toLoadBalancerRef(ref)
			if err != nil {
				return fmt.Errorf("re-encoding %+v: %w: %w", ref, err, errRoundTrip)
			}
			again, err := fromLoadBalancerRef("again", wire)
			if err != nil {
				return fmt.Errorf("re-decoding %+v: %w: %w", ref, err, errRoundTrip)
			}
			if !reflect.DeepEqual(again, ref) {
				return fmt.Errorf("load balancer round trip changed %+v to %+v: %w", ref, again, errRoundTrip)
			}
		}
		return nil
	},
	func(b []byte) error {
		var m pb.ListRoutesResponse
		if err := proto.Unmarshal(b, &m); err != nil {
			return err
		}
		for i, r := range m.Routes {
			rt, err := fromRoute(fmt.Sprintf("routes[%d]", i), r)
			if err != nil {
				return err
			}
			again, err := fromRoute("again", toRoute(rt))
			if err != nil {
				return fmt.Errorf("re-decoding %+v: %w: %w", rt, err, errRoundTrip)
			}
			if !reflect.DeepEqual(again, rt) {
				return fmt.Errorf("route round trip changed %+v to %+v: %w", rt, again, errRoundTrip)
			}
		}
		return nil
	},
	func(b []byte) error {
		var m pb.GetLoadBalancerResponse
		if err := proto.Unmarshal(b, &m); err != nil {
			return err
		}
		_, err := decodeStatus("status", m.Status)
		return err
	},
	func(b []byte) error {
		var m pb.Error
		if err := proto.Unmarshal(b, &m); err != nil {
			return err
		}
		// A rebuilt error keeps its message, and classifies as the kind it
		// came as (an unknown kind is a plain error).
		got := fromError(&m)
		if got.Error() != m.GetMessage() && m.GetKind() != pb.Error_KIND_RETRY {
			return fmt.Errorf("error %q rebuilt as %q: %w", m.GetMessage(), got.Error(), errRoundTrip)
		}
		want := m.GetKind()
		if _, known := pb.Error_Kind_name[int32(want)]; !known || want == pb.Error_KIND_UNSPECIFIED {
			want = pb.Error_KIND_PLAIN
		}
		if k := toError(got).GetKind(); k != want {
			return fmt.Errorf("error of kind %v rebuilt as kind %v: %w", want, k, errRoundTrip)
		}
		return nil
	},
	// Plugin side: requests of the manager.
	func(b []byte) error {
		var m pb.InstanceRequest
		if err := proto.Unmarshal(b, &m); err != nil {
			return err
		}
		_, err := decodeNode(m.Node)
		return err
	},
	func(b []byte) error {
		var m pb.LoadBalancerNodesRequest
		if err := proto.Unmarshal(b, &m); err != nil {
			return err
		}
		_, _, err := decodeLBRequest(m.ClusterName, m.Service, m.Nodes)
		return err
	},
}

// errRoundTrip marks a decoded value that does not survive being encoded and
// decoded again: the codec lost or changed data.
var errRoundTrip = errors.New("round trip")

// FuzzDecodeMessages feeds arbitrary bytes to the decoding of every protocol
// message that carries provider values: nothing panics, and whatever decodes
// survives an encode-decode round trip unchanged.
func FuzzDecodeMessages(f *testing.F) {
	seed := func(kind byte, m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte{kind}, b...))
	}
	seed(0, &pb.Capabilities{ProtocolVersion: proto.Uint32(ProtocolVersion), ProviderIdScheme: proto.String("minicloud"), HasClusterId: proto.Bool(true),
		Interfaces: []pb.Interface{pb.Interface_INTERFACE_INSTANCES_V2}, Extensions: []pb.Extension{pb.Extension_EXTENSION_INSTANCE_LISTER}})
	seed(1, &pb.InstanceMetadataResponse{Metadata: &pb.InstanceMetadata{ProviderId: proto.String("minicloud://i-1"), InstanceType: proto.String("mc.small"),
		NodeAddresses: []*pb.NodeAddress{{Type: proto.String("InternalIP"), Address: proto.String("127.10.0.1")}}}})
	seed(2, &pb.ListInstancesResponse{Instances: []*pb.Instance{{
		Name: proto.String("node-1"), Shutdown: proto.Bool(false),
		Metadata:      &pb.InstanceMetadata{ProviderId: proto.String("minicloud://i-1"), Zone: proto.String("a"), AdditionalLabels: map[string]string{"k": "v"}},
		MetadataError: &pb.Error{Kind: pb.Error_KIND_TRANSIENT, Message: proto.String("timeout")},
	}}})
	seed(3, &pb.ListLoadBalancersResponse{LoadBalancers: []*pb.LoadBalancerRef{{
		Name: proto.String("a1"), ServiceNamespace: proto.String("default"), ServiceName: proto.String("web"),
		ServiceUid: proto.String("u"), Status: []byte(`{"ingress":[{"ip":"127.100.0.1"}]}`), Provisioning: proto.Bool(true),
	}}})
	seed(4, &pb.ListRoutesResponse{Routes: []*pb.Route{{Name: proto.String("r"), TargetNode: proto.String("n"), DestinationCidr: proto.String("10.0.0.0/24"),
		TargetNodeAddresses: []*pb.NodeAddress{{Type: proto.String("InternalIP"), Address: proto.String("10.0.0.1")}}}}})
	seed(5, &pb.GetLoadBalancerResponse{Status: []byte(`{"ingress":[{"hostname":"lb"}]}`)})
	seed(6, &pb.Error{Kind: pb.Error_KIND_THROTTLED, Message: proto.String("slow down"), RetryAfter: durationpb.New(3e9)})
	seed(7, &pb.InstanceRequest{Node: []byte(`{"metadata":{"name":"n"},"spec":{"providerID":"minicloud://i-1"}}`)})
	seed(8, &pb.LoadBalancerNodesRequest{ClusterName: proto.String("c"), Service: []byte(`{"metadata":{"name":"web"}}`), Nodes: [][]byte{[]byte(`{}`)}})

	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		if err := decoders[int(in[0])%len(decoders)](in[1:]); errors.Is(err, errRoundTrip) {
			t.Fatal(err)
		}
	})
}
