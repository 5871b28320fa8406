package minicloud

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// providerIDPrefix starts every provider ID of this provider.
const providerIDPrefix = ProviderName + "://"

// listPageSize is the page size of full listings (the server's maximum; a
// variable so that tests can make listings span pages).
var listPageSize = 1000

// ProviderID returns the provider ID of a minicloud instance.
func ProviderID(instanceID string) string { return providerIDPrefix + instanceID }

// InstanceIDOf returns the instance ID in a provider ID of this provider,
// or an error naming the provider ID when it is not one.
func InstanceIDOf(providerID string) (string, error) {
	id, ok := strings.CutPrefix(providerID, providerIDPrefix)
	if !ok || id == "" || strings.ContainsAny(id, "/?#") {
		return "", fmt.Errorf("provider ID %q is not of the form %s<instance-id>", providerID, providerIDPrefix)
	}
	return id, nil
}

// instances implements cloudprovider.InstancesV2 and stratus.InstanceLister.
type instances struct {
	api *client.Client
}

var (
	_ cloudprovider.InstancesV2 = (*instances)(nil)
	_ stratus.InstanceLister    = (*instances)(nil)
)

// find returns the node's instance: by provider ID when the node has one,
// else the instance named like the node. A missing instance is
// cloudprovider.InstanceNotFound.
func (in *instances) find(ctx context.Context, node *v1.Node) (*api.Instance, error) {
	if node.Spec.ProviderID != "" {
		id, err := InstanceIDOf(node.Spec.ProviderID)
		if err != nil {
			return nil, err
		}
		inst, err := in.api.GetInstance(ctx, id)
		if client.IsNotFound(err) {
			return nil, fmt.Errorf("instance %s: %w", id, cloudprovider.InstanceNotFound)
		}
		if err != nil {
			return nil, classify("", err) // the request names the instance
		}
		return inst, nil
	}
	return in.byName(ctx, node.Name)
}

// byName returns the instance named name, or cloudprovider.InstanceNotFound.
func (in *instances) byName(ctx context.Context, name string) (*api.Instance, error) {
	page, err := in.api.ListInstancesPage(ctx, client.ListOptions{Name: name})
	if err != nil {
		return nil, classify(fmt.Sprintf("find the instance named %s", name), err)
	}
	if len(page.Items) == 0 {
		return nil, fmt.Errorf("no instance named %s: %w", name, cloudprovider.InstanceNotFound)
	}
	return &page.Items[0], nil
}

// InstanceExists reports whether the node's instance exists; a stopped
// instance exists.
func (in *instances) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	_, err := in.find(ctx, node)
	if isNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// InstanceShutdown reports whether the node's instance is stopped. A missing
// instance is not shut down (the lifecycle controller deletes its node).
func (in *instances) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	inst, err := in.find(ctx, node)
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return inst.State == api.InstanceStopped, nil
}

// InstanceMetadata returns the node's instance's provider ID, type, zone,
// region and addresses; cloudprovider.InstanceNotFound when it has none.
func (in *instances) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	inst, err := in.find(ctx, node)
	if err != nil {
		return nil, err
	}
	md := metadataOf(inst)
	return &md, nil
}

// ListInstances lists every instance, all pages, with its metadata.
func (in *instances) ListInstances(ctx context.Context) ([]stratus.Instance, error) {
	all, err := in.api.ListInstances(ctx, client.ListOptions{PageSize: listPageSize})
	if err != nil {
		return nil, classify("", err) // the request says it all
	}
	out := make([]stratus.Instance, 0, len(all))
	for i := range all {
		out = append(out, stratus.Instance{Name: all[i].Name, Metadata: metadataOf(&all[i]), Shutdown: all[i].State == api.InstanceStopped})
	}
	return out, nil
}

// metadataOf is what InstanceMetadata reports for inst. Addresses are
// IPv4-primary, as dual-stack providers report them: the IPv4 InternalIP,
// the IPv6 InternalIP of a dual-stack instance, the ExternalIP, then the
// Hostname. The instance's labels are the Node's additional labels (the
// node controller drops those in Kubernetes namespaces).
func metadataOf(inst *api.Instance) cloudprovider.InstanceMetadata {
	addrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: inst.PrivateIP}}
	if inst.PrivateIPv6 != "" {
		addrs = append(addrs, v1.NodeAddress{Type: v1.NodeInternalIP, Address: inst.PrivateIPv6})
	}
	if inst.PublicIP != "" {
		addrs = append(addrs, v1.NodeAddress{Type: v1.NodeExternalIP, Address: inst.PublicIP})
	}
	addrs = append(addrs, v1.NodeAddress{Type: v1.NodeHostName, Address: inst.Name})
	return cloudprovider.InstanceMetadata{
		ProviderID:       ProviderID(inst.ID),
		InstanceType:     inst.Type,
		NodeAddresses:    addrs,
		Zone:             inst.Zone,
		Region:           inst.Region,
		AdditionalLabels: maps.Clone(inst.Labels),
	}
}

// isNotFound reports whether err says the instance does not exist.
func isNotFound(err error) bool { return errors.Is(err, cloudprovider.InstanceNotFound) }
