// Package upstream is the main of the upstream cloud-controller-manager:
// the controllers of k8s.io/cloud-provider's app package, unchanged, for
// whichever providers the calling binary compiles in (a blank import that
// registers them). The ccm, vsphere-ccm and openstack-ccm binaries of hack/kubebins are
// this package plus their provider.
package upstream

import (
	"os"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as the upstream binaries have
	"k8s.io/klog/v2"
)

// Main runs the cloud-controller-manager command and exits.
func Main() {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	cmd := app.NewCloudControllerManagerCommand(opts, newCloud, app.DefaultInitFuncConstructors,
		names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	os.Exit(cli.Run(cmd))
}

// newCloud initializes the provider named by --cloud-provider from
// --cloud-config, as every upstream CCM main does.
func newCloud(c *config.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared.CloudProvider
	cloud, err := cloudprovider.InitCloudProvider(shared.Name, shared.CloudConfigFile)
	if err != nil {
		klog.Fatalf("cloud provider %q could not be initialized: %v", shared.Name, err)
	}
	if cloud == nil {
		klog.Fatalf("cloud provider %q is nil", shared.Name)
	}
	if !cloud.HasClusterID() && !c.ComponentConfig.KubeCloudShared.AllowUntaggedCloud {
		klog.Fatalf("cloud provider %q has no ClusterID; set --allow-untagged-cloud to run anyway", shared.Name)
	}
	return cloud
}
