package plugin

import (
	"context"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/stratus-ccm/stratus/pkg/stratus"
	pb "github.com/stratus-ccm/stratus/proto/stratus/provider/v1"
)

// addBackendsDigests declares the provider's backends digests in caps: a
// provider that lists its load balancers and computes their digests.
func addBackendsDigests(p cloudprovider.Interface, caps *pb.Capabilities) {
	if !slices.Contains(caps.Extensions, pb.Extension_EXTENSION_LOAD_BALANCER_LISTER) {
		return
	}
	if _, ok := lbExtension[stratus.BackendsDigester](p); ok {
		caps.Extensions = append(caps.Extensions, pb.Extension_EXTENSION_BACKENDS_DIGESTER)
	}
}

// BackendsDigest answers with the provider's digest; known is false when it
// cannot tell.
func (s *server) BackendsDigest(ctx context.Context, req *pb.LoadBalancerNodesRequest) (*pb.BackendsDigestResponse, error) {
	d, ok := lbExtension[stratus.BackendsDigester](s.p)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "the provider computes no backends digests")
	}
	svc, nodes, err := decodeLBRequest(req.ClusterName, req.Service, req.Nodes)
	if err != nil {
		return nil, err
	}
	digest, known := d.BackendsDigest(ctx, req.GetClusterName(), svc, nodes)
	resp := &pb.BackendsDigestResponse{Known: proto.Bool(known)}
	if known {
		resp.Digest = proto.String(digest)
	}
	return resp, nil
}

var _ stratus.BackendsDigester = loadBalancer{}

// BackendsDigest is the plugin's digest; false when the plugin declares
// none, or the call fails (a doubt: stratus then sends the update).
func (l loadBalancer) BackendsDigest(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (string, bool) {
	if !slices.Contains(l.c.caps.Extensions, pb.Extension_EXTENSION_BACKENDS_DIGESTER) {
		return "", false
	}
	req, err := l.nodesRequest(clusterName, svc, nodes)
	if err != nil {
		return "", false
	}
	resp, err := invoke(ctx, l.c, "BackendsDigest", func(ctx context.Context) (*pb.BackendsDigestResponse, error) {
		return l.c.rpc.BackendsDigest(ctx, req)
	})
	if err == nil && resp.Known == nil {
		err = l.c.missing("BackendsDigest", "known")
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "BackendsDigest", "service", klog.KObj(svc))
		return "", false
	}
	return resp.GetDigest(), resp.GetKnown() && resp.GetDigest() != ""
}
