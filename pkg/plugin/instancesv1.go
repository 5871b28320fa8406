package plugin

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	pb "github.com/stratus-ccm/stratus/proto/stratus/provider/v1"
)

// The plugin's side of Instances (v1) and Zones: providers without
// InstancesV2 (an unmodified upstream provider may have only these) are
// served call for call, and the manager's cloud layer assembles node
// metadata from them as k8s.io/cloud-provider does.

func (s *server) instancesV1() (cloudprovider.Instances, error) {
	if inst, ok := s.p.Instances(); ok && inst != nil {
		return inst, nil
	}
	return nil, status.Error(codes.Unimplemented, "the provider does not support Instances")
}

func (s *server) zones() (cloudprovider.Zones, error) {
	if z, ok := s.p.Zones(); ok && z != nil {
		return z, nil
	}
	return nil, status.Error(codes.Unimplemented, "the provider does not support Zones")
}

// required is the InvalidArgument error of a request without field.
func required(field string) error { return invalid(errors.New(field + ": required")) }

// requiredOf is the decode of a request field that must be set.
func requiredOf(field string, value *string) func() (string, error) {
	return func() (string, error) {
		if value == nil {
			return "", required(field)
		}
		return *value, nil
	}
}

// v1Call runs one Instances (v1) call whose request names a node or a
// provider ID (value, or required when nil).
func v1Call[T, R any](s *server, field string, value *string, fn func(cloudprovider.Instances, string) (T, error), reply func(T) R) (R, error) {
	return serve(s.instancesV1, requiredOf(field, value), func(inst cloudprovider.Instances, v string) (R, error) {
		t, err := fn(inst, v)
		if err != nil {
			var zero R
			return zero, err
		}
		return reply(t), nil
	})
}

func addressesReply(a []v1.NodeAddress) *pb.NodeAddressesResponse {
	return &pb.NodeAddressesResponse{NodeAddresses: toAddresses(a)}
}

func typeReply(t string) *pb.InstanceTypeResponse {
	return &pb.InstanceTypeResponse{InstanceType: proto.String(t)}
}

func (s *server) NodeAddresses(ctx context.Context, req *pb.NodeNameRequest) (*pb.NodeAddressesResponse, error) {
	return v1Call(s, "node_name", req.NodeName, func(i cloudprovider.Instances, name string) ([]v1.NodeAddress, error) {
		return i.NodeAddresses(ctx, types.NodeName(name))
	}, addressesReply)
}

func (s *server) NodeAddressesByProviderID(ctx context.Context, req *pb.ProviderIDRequest) (*pb.NodeAddressesResponse, error) {
	return v1Call(s, "provider_id", req.ProviderId, func(i cloudprovider.Instances, id string) ([]v1.NodeAddress, error) {
		return i.NodeAddressesByProviderID(ctx, id)
	}, addressesReply)
}

func (s *server) InstanceID(ctx context.Context, req *pb.NodeNameRequest) (*pb.InstanceIDResponse, error) {
	return v1Call(s, "node_name", req.NodeName, func(i cloudprovider.Instances, name string) (string, error) {
		return i.InstanceID(ctx, types.NodeName(name))
	}, func(id string) *pb.InstanceIDResponse { return &pb.InstanceIDResponse{InstanceId: proto.String(id)} })
}

func (s *server) InstanceType(ctx context.Context, req *pb.NodeNameRequest) (*pb.InstanceTypeResponse, error) {
	return v1Call(s, "node_name", req.NodeName, func(i cloudprovider.Instances, name string) (string, error) {
		return i.InstanceType(ctx, types.NodeName(name))
	}, typeReply)
}

func (s *server) InstanceTypeByProviderID(ctx context.Context, req *pb.ProviderIDRequest) (*pb.InstanceTypeResponse, error) {
	return v1Call(s, "provider_id", req.ProviderId, func(i cloudprovider.Instances, id string) (string, error) {
		return i.InstanceTypeByProviderID(ctx, id)
	}, typeReply)
}

func (s *server) CurrentNodeName(ctx context.Context, req *pb.CurrentNodeNameRequest) (*pb.CurrentNodeNameResponse, error) {
	return v1Call(s, "hostname", req.Hostname, func(i cloudprovider.Instances, host string) (types.NodeName, error) {
		return i.CurrentNodeName(ctx, host)
	}, func(n types.NodeName) *pb.CurrentNodeNameResponse {
		return &pb.CurrentNodeNameResponse{NodeName: proto.String(string(n))}
	})
}

func (s *server) InstanceExistsByProviderID(ctx context.Context, req *pb.ProviderIDRequest) (*pb.InstanceExistsResponse, error) {
	return v1Call(s, "provider_id", req.ProviderId, func(i cloudprovider.Instances, id string) (bool, error) {
		return i.InstanceExistsByProviderID(ctx, id)
	}, func(b bool) *pb.InstanceExistsResponse { return &pb.InstanceExistsResponse{Exists: proto.Bool(b)} })
}

func (s *server) InstanceShutdownByProviderID(ctx context.Context, req *pb.ProviderIDRequest) (*pb.InstanceShutdownResponse, error) {
	return v1Call(s, "provider_id", req.ProviderId, func(i cloudprovider.Instances, id string) (bool, error) {
		return i.InstanceShutdownByProviderID(ctx, id)
	}, func(b bool) *pb.InstanceShutdownResponse {
		return &pb.InstanceShutdownResponse{Shutdown: proto.Bool(b)}
	})
}

// zoneCall runs one Zones call.
func (s *server) zoneCall(fn func(cloudprovider.Zones) (cloudprovider.Zone, error)) (*pb.ZoneResponse, error) {
	return serve(s.zones, noRequest, func(z cloudprovider.Zones, _ struct{}) (*pb.ZoneResponse, error) {
		zone, err := fn(z)
		return &pb.ZoneResponse{Zone: &pb.Zone{FailureDomain: proto.String(zone.FailureDomain), Region: proto.String(zone.Region)}}, err
	})
}

func (s *server) GetZone(ctx context.Context, _ *pb.GetZoneRequest) (*pb.ZoneResponse, error) {
	return s.zoneCall(func(z cloudprovider.Zones) (cloudprovider.Zone, error) { return z.GetZone(ctx) })
}

func (s *server) GetZoneByProviderID(ctx context.Context, req *pb.ProviderIDRequest) (*pb.ZoneResponse, error) {
	if req.ProviderId == nil {
		return nil, required("provider_id")
	}
	return s.zoneCall(func(z cloudprovider.Zones) (cloudprovider.Zone, error) {
		return z.GetZoneByProviderID(ctx, req.GetProviderId())
	})
}

func (s *server) GetZoneByNodeName(ctx context.Context, req *pb.NodeNameRequest) (*pb.ZoneResponse, error) {
	if req.NodeName == nil {
		return nil, required("node_name")
	}
	return s.zoneCall(func(z cloudprovider.Zones) (cloudprovider.Zone, error) {
		return z.GetZoneByNodeName(ctx, types.NodeName(req.GetNodeName()))
	})
}

// The manager's side of Instances (v1) and Zones.

type instancesV1 struct{ c *Client }

var _ cloudprovider.Instances = instancesV1{}

func (i instancesV1) addresses(ctx context.Context, method string, fn func(context.Context) (*pb.NodeAddressesResponse, error)) ([]v1.NodeAddress, error) {
	resp, err := invoke(ctx, i.c, method, fn)
	if err != nil {
		return nil, err
	}
	addrs, err := fromAddresses("node_addresses", resp.NodeAddresses)
	if err != nil {
		return nil, i.c.garbled(method, err)
	}
	return addrs, nil
}

func (i instancesV1) NodeAddresses(ctx context.Context, name types.NodeName) ([]v1.NodeAddress, error) {
	return i.addresses(ctx, "NodeAddresses", func(ctx context.Context) (*pb.NodeAddressesResponse, error) {
		return i.c.rpc.NodeAddresses(ctx, &pb.NodeNameRequest{NodeName: proto.String(string(name))})
	})
}

func (i instancesV1) NodeAddressesByProviderID(ctx context.Context, providerID string) ([]v1.NodeAddress, error) {
	return i.addresses(ctx, "NodeAddressesByProviderID", func(ctx context.Context) (*pb.NodeAddressesResponse, error) {
		return i.c.rpc.NodeAddressesByProviderID(ctx, &pb.ProviderIDRequest{ProviderId: proto.String(providerID)})
	})
}

func (i instancesV1) InstanceID(ctx context.Context, name types.NodeName) (string, error) {
	resp, err := invoke(ctx, i.c, "InstanceID", func(ctx context.Context) (*pb.InstanceIDResponse, error) {
		return i.c.rpc.InstanceID(ctx, &pb.NodeNameRequest{NodeName: proto.String(string(name))})
	})
	if err != nil {
		return "", err
	}
	if resp.InstanceId == nil {
		return "", i.c.missing("InstanceID", "instance_id")
	}
	return resp.GetInstanceId(), nil
}

func (i instancesV1) instanceType(ctx context.Context, method string, fn func(context.Context) (*pb.InstanceTypeResponse, error)) (string, error) {
	resp, err := invoke(ctx, i.c, method, fn)
	if err != nil {
		return "", err
	}
	if resp.InstanceType == nil {
		return "", i.c.missing(method, "instance_type")
	}
	return resp.GetInstanceType(), nil
}

func (i instancesV1) InstanceType(ctx context.Context, name types.NodeName) (string, error) {
	return i.instanceType(ctx, "InstanceType", func(ctx context.Context) (*pb.InstanceTypeResponse, error) {
		return i.c.rpc.InstanceType(ctx, &pb.NodeNameRequest{NodeName: proto.String(string(name))})
	})
}

func (i instancesV1) InstanceTypeByProviderID(ctx context.Context, providerID string) (string, error) {
	return i.instanceType(ctx, "InstanceTypeByProviderID", func(ctx context.Context) (*pb.InstanceTypeResponse, error) {
		return i.c.rpc.InstanceTypeByProviderID(ctx, &pb.ProviderIDRequest{ProviderId: proto.String(providerID)})
	})
}

// AddSSHKeyToAllInstances is not carried by the protocol (no controller
// calls it): it returns cloudprovider.NotImplemented.
func (i instancesV1) AddSSHKeyToAllInstances(context.Context, string, []byte) error {
	return cloudprovider.NotImplemented
}

func (i instancesV1) CurrentNodeName(ctx context.Context, hostname string) (types.NodeName, error) {
	resp, err := invoke(ctx, i.c, "CurrentNodeName", func(ctx context.Context) (*pb.CurrentNodeNameResponse, error) {
		return i.c.rpc.CurrentNodeName(ctx, &pb.CurrentNodeNameRequest{Hostname: proto.String(hostname)})
	})
	if err != nil {
		return "", err
	}
	if resp.NodeName == nil {
		return "", i.c.missing("CurrentNodeName", "node_name")
	}
	return types.NodeName(resp.GetNodeName()), nil
}

func (i instancesV1) InstanceExistsByProviderID(ctx context.Context, providerID string) (bool, error) {
	resp, err := invoke(ctx, i.c, "InstanceExistsByProviderID", func(ctx context.Context) (*pb.InstanceExistsResponse, error) {
		return i.c.rpc.InstanceExistsByProviderID(ctx, &pb.ProviderIDRequest{ProviderId: proto.String(providerID)})
	})
	if err != nil {
		return false, err
	}
	if resp.Exists == nil {
		return false, i.c.missing("InstanceExistsByProviderID", "exists")
	}
	return resp.GetExists(), nil
}

func (i instancesV1) InstanceShutdownByProviderID(ctx context.Context, providerID string) (bool, error) {
	resp, err := invoke(ctx, i.c, "InstanceShutdownByProviderID", func(ctx context.Context) (*pb.InstanceShutdownResponse, error) {
		return i.c.rpc.InstanceShutdownByProviderID(ctx, &pb.ProviderIDRequest{ProviderId: proto.String(providerID)})
	})
	if err != nil {
		return false, err
	}
	if resp.Shutdown == nil {
		return false, i.c.missing("InstanceShutdownByProviderID", "shutdown")
	}
	return resp.GetShutdown(), nil
}

type zones struct{ c *Client }

var _ cloudprovider.Zones = zones{}

func (z zones) zone(ctx context.Context, method string, fn func(context.Context) (*pb.ZoneResponse, error)) (cloudprovider.Zone, error) {
	resp, err := invoke(ctx, z.c, method, fn)
	if err != nil {
		return cloudprovider.Zone{}, err
	}
	if resp.Zone == nil || resp.Zone.FailureDomain == nil || resp.Zone.Region == nil {
		return cloudprovider.Zone{}, z.c.missing(method, "zone with failure_domain and region")
	}
	return cloudprovider.Zone{FailureDomain: resp.Zone.GetFailureDomain(), Region: resp.Zone.GetRegion()}, nil
}

func (z zones) GetZone(ctx context.Context) (cloudprovider.Zone, error) {
	return z.zone(ctx, "GetZone", func(ctx context.Context) (*pb.ZoneResponse, error) {
		return z.c.rpc.GetZone(ctx, &pb.GetZoneRequest{})
	})
}

func (z zones) GetZoneByProviderID(ctx context.Context, providerID string) (cloudprovider.Zone, error) {
	return z.zone(ctx, "GetZoneByProviderID", func(ctx context.Context) (*pb.ZoneResponse, error) {
		return z.c.rpc.GetZoneByProviderID(ctx, &pb.ProviderIDRequest{ProviderId: proto.String(providerID)})
	})
}

func (z zones) GetZoneByNodeName(ctx context.Context, name types.NodeName) (cloudprovider.Zone, error) {
	return z.zone(ctx, "GetZoneByNodeName", func(ctx context.Context) (*pb.ZoneResponse, error) {
		return z.c.rpc.GetZoneByNodeName(ctx, &pb.NodeNameRequest{NodeName: proto.String(string(name))})
	})
}
