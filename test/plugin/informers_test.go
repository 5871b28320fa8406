package plugin_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	listersv1 "k8s.io/client-go/listers/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
	"k8s.io/controller-manager/pkg/clientbuilder"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/pkg/plugin"
)

// nodeReader is a provider that reads Nodes through the shared informers the
// manager hands it (cloudprovider.InformerUser), as the upstream vSphere and
// OpenStack providers do: its instance metadata names the zone from the
// Node's own label, which it can only know from its informer.
type nodeReader struct {
	*fake.Cloud
	nodes listersv1.NodeLister
}

func (p *nodeReader) SetInformers(f informers.SharedInformerFactory) {
	p.nodes = f.Core().V1().Nodes().Lister()
}

func (p *nodeReader) InstancesV2() (cloudprovider.InstancesV2, bool) { return p, true }

func (p *nodeReader) InstanceExists(context.Context, *v1.Node) (bool, error)   { return true, nil }
func (p *nodeReader) InstanceShutdown(context.Context, *v1.Node) (bool, error) { return false, nil }
func (p *nodeReader) InstanceMetadata(_ context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	if p.nodes == nil {
		return nil, os.ErrInvalid // no informers: the gap this test guards against
	}
	n, err := p.nodes.Get(node.Name)
	if err != nil {
		return nil, err
	}
	return &cloudprovider.InstanceMetadata{ProviderID: "fake://" + n.Name, Zone: n.Labels["example.com/zone"]}, nil
}

// Serve hands a provider that reads Kubernetes objects through informers a
// started informer factory built from its ClientBuilder, as the manager does
// in process; without it such providers fail (upstream OpenStack's routes
// dereference a nil informer and crash the plugin).
func TestServeStartsInformersForInformerUsers(t *testing.T) {
	env := testenv.Get(t)
	kube := env.Clientset(t)
	name := "informed-" + env.Namespace(t)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"example.com/zone": "zone-b"}}}
	if _, err := kube.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })

	dir, err := os.MkdirTemp("", "plugin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	address := "unix://" + filepath.Join(dir, "p.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- plugin.Serve(ctx, &nodeReader{Cloud: &fake.Cloud{Provider: "fake"}}, plugin.ServeOptions{
			Address: address, ClientBuilder: clientbuilder.SimpleControllerClientBuilder{ClientConfig: env.Config},
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer dcancel()
	client, err := plugin.Dial(dctx, plugin.Config{Address: address})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { client.Close() })
	instances, ok := client.InstancesV2()
	if !ok {
		t.Fatal("plugin does not serve InstancesV2")
	}
	// The informer's cache fills asynchronously: poll until it answers.
	var md *cloudprovider.InstanceMetadata
	err = wait.PollUntilContextTimeout(dctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		md, err = instances.InstanceMetadata(ctx, node)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("InstanceMetadata through the plugin never answered from the provider's informer: last error %v", err)
	}
	if md.Zone != "zone-b" || md.ProviderID != "fake://"+name {
		t.Errorf("InstanceMetadata = %+v, want zone-b from the Node's label", md)
	}
}
