package vsphere

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
)

// ProviderName is the name the provider registers under (--cloud-provider)
// and the scheme of its provider IDs, as upstream's.
const ProviderName = "vsphere"

func init() {
	cloudprovider.RegisterCloudProvider(ProviderName, func(r io.Reader) (cloudprovider.Interface, error) {
		cfg, err := ParseConfig(r)
		if err != nil {
			return nil, err
		}
		return New(cfg)
	})
}

// Cloud is the vSphere provider: InstancesV2 and Zones over the VMs of one
// or more vCenters, plus stratus's InstanceLister and InstanceWatcher.
type Cloud struct {
	cfg *Config
	vcs []*vcenter

	initOnce  sync.Once
	closeOnce sync.Once
	// closing ends running watches on Close, which waits for them (so that
	// their collectors are destroyed before the sessions end).
	closing chan struct{}
	watches sync.WaitGroup
}

// vcenter is everything the provider keeps per vCenter.
type vcenter struct {
	cfg   *VCenter
	creds *credentials
	conn  *conn
	inv   *inventory
	zones *zoneCache
}

// New returns the provider for cfg. It connects to nothing yet: sessions
// are opened by the first call that needs one.
func New(cfg *Config) (*Cloud, error) {
	if cfg == nil || len(cfg.VCenters) == 0 {
		return nil, ErrNoConfig
	}
	c := &Cloud{cfg: cfg, closing: make(chan struct{})}
	for _, v := range cfg.VCenters {
		creds := &credentials{vc: v}
		cn := newConn(v, creds)
		c.vcs = append(c.vcs, &vcenter{cfg: v, creds: creds, conn: cn, inv: newInventory(cn), zones: newZoneCache(cn, cfg.Labels)})
	}
	return c, nil
}

// secretSyncTimeout bounds how long Initialize waits for the credentials
// Secrets to be listed.
const secretSyncTimeout = 30 * time.Second

// Initialize starts watching the Secrets that hold vCenter credentials,
// through the client the builder gives, until stop closes (then it logs
// out of vCenter), and returns once they have been listed or
// secretSyncTimeout has passed.
func (c *Cloud) Initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.initOnce.Do(func() {
		watches := map[string]*secretWatch{}
		for _, v := range c.vcs {
			if v.cfg.SecretName == "" {
				continue
			}
			key := v.cfg.SecretNamespace + "/" + v.cfg.SecretName
			w := watches[key]
			if w == nil {
				w = newSecretWatch(v.cfg.SecretNamespace, v.cfg.SecretName, nil)
				watches[key] = w
			}
			v.creds.secrets = w
		}
		if len(watches) > 0 {
			if b == nil {
				klog.ErrorS(errNoClient, "vsphere: vCenter sessions will fail")
			} else if kc, err := b.Client("stratus-vsphere-provider"); err != nil {
				klog.ErrorS(err, "vsphere: no Kubernetes client; vCenter sessions will fail", "cause", errNoClient)
			} else {
				for _, w := range watches {
					w.onChange = c.credentialsChanged(w)
					w.start(kc, stop)
				}
				// Controllers start once Initialize returns: waiting for the
				// first listing keeps their first calls from failing (and
				// from a Warning event on a joining node) only because the
				// Secret was not read yet. A Secret that cannot be listed
				// (no RBAC, API server away) delays startup by at most
				// secretSyncTimeout; sessions fail until it is read.
				deadline := time.Now().Add(secretSyncTimeout)
				for key, w := range watches {
					if !w.waitSynced(stop, time.Until(deadline)) {
						klog.ErrorS(nil, "vsphere: credentials Secret not read yet; vCenter sessions fail until it is",
							"secret", key, "waited", secretSyncTimeout)
					}
				}
			}
		}
		if stop != nil {
			go func() {
				<-stop
				c.Close()
			}()
		}
	})
}

// credentialsChanged returns the callback of a Secret: the vCenters whose
// credentials it holds try them at once.
func (c *Cloud) credentialsChanged(w *secretWatch) func() {
	return func() {
		for _, v := range c.vcs {
			if v.creds.secrets == w {
				v.conn.credentialsChanged()
			}
		}
	}
}

// Close stops running watches and logs out of every vCenter.
func (c *Cloud) Close() {
	c.closeOnce.Do(func() {
		close(c.closing)
		c.watches.Wait()
		for _, v := range c.vcs {
			v.conn.close()
		}
	})
}

// LoadBalancer returns false: vSphere has no load balancers of its own
// (upstream's NSX-T load balancer is not supported).
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return nil, false }

// Instances returns false: the provider implements InstancesV2.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 returns the instances implementation.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

// Zones returns the zones implementation (for callers that use Zones
// rather than InstancesV2's metadata).
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return c, true }

// Clusters returns false.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes returns false: there are no vSphere routes (upstream's NSX-T
// routes are not supported).
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return nil, false }

// ProviderName returns "vsphere".
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID returns true, as upstream.
func (c *Cloud) HasClusterID() bool { return true }

// WatchInstances keeps every vCenter's VMs current from a watch until ctx
// ends, calling changed whenever a listing could answer differently, and
// refreshes zones every few minutes. It returns nil when ctx ends: a watch
// that fails is set up again with a backoff, and listings retrieve from
// vCenter (or fail) meanwhile.
func (c *Cloud) WatchInstances(ctx context.Context, changed func()) error {
	if changed == nil {
		return errors.New("vsphere: WatchInstances needs a changed callback")
	}
	select {
	case <-c.closing:
		return errors.New("vsphere: the provider is closed")
	default:
	}
	c.watches.Add(1)
	defer c.watches.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	for _, v := range c.vcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v.inv.watch(ctx, changed)
		}()
		if c.cfg.Labels.Enabled() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v.refreshZones(ctx, changed)
			}()
		}
	}
	wg.Wait()
	return nil
}

// refreshZones re-reads zones every zoneRefresh until ctx ends.
func (v *vcenter) refreshZones(ctx context.Context, changed func()) {
	logger := klog.FromContext(ctx).WithValues("vcenter", v.cfg.Server)
	for {
		t := time.NewTimer(zoneRefresh)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		diff, err := v.zones.refresh(ctx)
		if err != nil {
			logger.Error(err, "Refreshing zones and regions from tags; nodes keep the last known ones")
			continue
		}
		if diff {
			changed()
		}
	}
}
