package manager

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/controller-manager/pkg/clientbuilder"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stratus-ccm/stratus/internal/cloud"
)

// UserAgent is the API client name of the manager, as upstream's.
const UserAgent = "cloud-controller-manager"

// ErrLeaderElectionLost is returned by Run when this replica lost the lease; the
// process should exit so that it restarts as a standby.
var ErrLeaderElectionLost = errors.New("leader election lost")

// Run validates o (and the --config file it names), builds the providers, and runs
// the manager until ctx is cancelled (SIGTERM: controllers stop, in-flight work
// finishes or is cancelled within the shutdown grace period, the lease is
// released) or the lease is lost (ErrLeaderElectionLost). Nothing starts when the
// configuration is invalid.
func Run(ctx context.Context, o *Options) error {
	logger := log.FromContext(ctx).WithName("manager")
	var cfg *Config
	if o.ConfigFile != "" {
		var err error
		if cfg, err = LoadConfig(o.ConfigFile); err != nil {
			return err
		}
	}
	if err := o.Validate(cfg); err != nil {
		return err
	}
	o.WarnIgnoredFlags()

	clouds, err := o.buildClouds(cfg)
	if err != nil {
		return err
	}
	restCfg, err := o.restConfig(ctx, logger)
	if err != nil {
		return err
	}
	// A lease read that shows another holder while this replica leads
	// cancels everything at once (watchedLock.onTaken), in-flight cloud and
	// API calls included.
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	mgr, err := o.newManager(runCtx, restCfg, cfg, clouds, logger, func(holder string) {
		logger.Info("the lease is held by another replica: stopping at once", "holder", holder)
		stopRun(ErrLeaderElectionLost)
	})
	if err != nil {
		return err
	}
	logger.Info("starting", "providers", providerNames(clouds), "leaderElection", o.LeaderElect)
	err = mgr.Start(runCtx)
	if errors.Is(context.Cause(runCtx), ErrLeaderElectionLost) {
		return ErrLeaderElectionLost
	}
	if err != nil {
		// controller-runtime reports a lost lease as a plain error with this text.
		if err.Error() == ErrLeaderElectionLost.Error() {
			return ErrLeaderElectionLost
		}
		return fmt.Errorf("manager: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// restConfig builds the API client configuration from --master/--kubeconfig
// (in-cluster when both are empty) with --kube-api-qps, --kube-api-burst and
// --kube-api-content-type, or no client-side limit when neither limit flag
// is given and the API server serves flow control (decideKubeAPILimit).
//
// The limit is one token bucket shared by every client made from this
// configuration (the informers, the providers' clients); without it each of
// them, down to controller-runtime's client per resource type, would get a
// bucket of its own. Each controller gets a bucket of its own instead
// (forController), as upstream gives each controller a clientset; leader
// election and request authentication keep their own (ownBucket).
func (o *Options) restConfig(ctx context.Context, logger logr.Logger) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags(o.Master, o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %q / --master %q: %w", o.Kubeconfig, o.Master, err)
	}
	reason := o.decideKubeAPILimit(ctx, rest.AddUserAgent(rest.CopyConfig(cfg), UserAgent))
	if o.stepAside {
		logger.Info("Kubernetes API client limit", "limited", false, "why", reason)
	} else {
		logger.Info("Kubernetes API client limit", "limited", true, "qpsPerController", o.KubeAPIQPS, "burst", o.KubeAPIBurst, "why", reason)
	}
	return o.limited(cfg), nil
}

// limited returns cfg with the manager's content type, user agent and a
// --kube-api-qps/--kube-api-burst bucket its clients share.
func (o *Options) limited(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.DisableCompression = true
	cfg.ContentType = o.KubeAPIContentType
	cfg.QPS = o.KubeAPIQPS
	cfg.Burst = o.KubeAPIBurst
	if o.stepAside {
		cfg.QPS = -1 // client-go: no client-side limit
	}
	cfg.RateLimiter = o.newBucket()
	return rest.AddUserAgent(cfg, UserAgent)
}

// ownBucket returns a copy of cfg whose clients get a token bucket of their
// own (of cfg's QPS and burst) instead of the manager's shared one: a lease
// renewal or a token review must not wait behind a burst of controller writes.
func ownBucket(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.RateLimiter = nil
	return c
}

// delegationConfig is the API server that reviews tokens and authorizes requests
// to the secure port.
func (o *Options) delegationConfig(main *rest.Config) (*rest.Config, error) {
	path := o.AuthorizationKubeconfig
	if path == "" {
		path = o.AuthenticationKubeconfig
	}
	if path == "" {
		return ownBucket(main), nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("--authentication-kubeconfig/--authorization-kubeconfig %s: %w", path, err)
	}
	return rest.AddUserAgent(cfg, UserAgent), nil
}

// buildClouds opens the providers: the --config composition, or the single
// --cloud-provider with --cloud-config.
func (o *Options) buildClouds(cfg *Config) (*cloud.Set, error) {
	cc := cloud.FromFlags(o.CloudProvider, o.CloudConfig)
	if cfg != nil && len(cfg.Providers) > 0 {
		cc = cfg.Config
	}
	set, err := cloud.Build(cc)
	if err != nil {
		if o.CloudProvider != "" {
			return nil, err // it names --cloud-provider and --cloud-config
		}
		return nil, fmt.Errorf("--config %s: %w", o.ConfigFile, err)
	}
	return set, nil
}

func providerNames(clouds *cloud.Set) []string {
	var names []string
	for _, p := range clouds.Providers() {
		names = append(names, p.Name())
	}
	return names
}

// newManager builds the controller-runtime manager with leader election, the
// secure server, and the runnable that initializes the providers and starts the
// controllers once this replica leads.
func (o *Options) newManager(ctx context.Context, restCfg *rest.Config, cfg *Config, clouds *cloud.Set, logger logr.Logger, onLeaseTaken func(holder string)) (manager.Manager, error) {
	grace := DefaultShutdownGracePeriod
	if cfg != nil && cfg.ShutdownGracePeriod != nil && cfg.ShutdownGracePeriod.Duration > 0 {
		grace = cfg.ShutdownGracePeriod.Duration
	}
	syncPeriod := o.resyncPeriod()
	mo := manager.Options{
		Scheme:                        scheme.Scheme,
		Logger:                        cleanStopLogger(logger, ctx.Done()),
		Cache:                         cacheOptions(syncPeriod),
		Metrics:                       metricsserver.Options{BindAddress: "0"}, // served by secureServer
		HealthProbeBindAddress:        "0",                                     // served by secureServer
		LeaderElection:                o.LeaderElect,
		LeaseDuration:                 &o.LeaseDuration,
		RenewDeadline:                 &o.RenewDeadline,
		RetryPeriod:                   &o.RetryPeriod,
		LeaderElectionID:              o.ResourceName,
		LeaderElectionNamespace:       o.ResourceNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &grace,
		BaseContext:                   func() context.Context { return ctx },
	}
	var lock *watchedLock
	if o.LeaderElect {
		var err error
		if lock, err = newLeaseLock(o, restCfg); err != nil {
			return nil, err
		}
		lock.onTaken = onLeaseTaken
		mo.LeaderElectionResourceLockInterface = lock
	}
	mgr, err := manager.New(restCfg, mo)
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}

	health := newHealthChecks()
	if lock != nil {
		health.add("leaderElection", lock.checker(mgr.Elected(), o.LeaseDuration))
	}
	authCfg, err := o.delegationConfig(restCfg)
	if err != nil {
		return nil, err
	}
	srv, err := newSecureServer(o, mgr, authCfg, health, logger.WithName("serving"))
	if err != nil {
		return nil, err
	}
	if srv != nil {
		if err := mgr.Add(srv); err != nil {
			return nil, err
		}
	}
	hooks, err := o.newWebhookServer(mgr, clouds, logger.WithName("webhook"))
	if err != nil {
		return nil, err
	}
	if hooks != nil {
		if err := mgr.Add(hooks); err != nil {
			return nil, err
		}
		health.add("webhook", hooks.StartedChecker())
	}
	starter := &controllerStarter{opts: o, cfg: cfg, mgr: mgr, clouds: clouds, restCfg: restCfg, health: health, log: logger}
	if err := mgr.Add(starter); err != nil {
		return nil, err
	}
	return mgr, nil
}

// cacheOptions configures the manager's informer cache. No controller reads
// managed fields, and at thousands of Nodes they are a large part of it.
func cacheOptions(syncPeriod time.Duration) cache.Options {
	return cache.Options{SyncPeriod: &syncPeriod, DefaultTransform: cache.TransformStripManagedFields()}
}

// resyncPeriod is upstream's informer resync: random in [--min-resync-period, 2×).
func (o *Options) resyncPeriod() time.Duration {
	return o.MinResyncPeriod + time.Duration(rand.Float64()*float64(o.MinResyncPeriod))
}

// controllerStarter runs on the leader only: it initializes the providers (with a
// client builder and, for providers that want one, a shared informer factory),
// then adds the enabled controllers to the running manager, then starts the
// informers — upstream's order.
type controllerStarter struct {
	opts    *Options
	cfg     *Config
	mgr     manager.Manager
	clouds  *cloud.Set
	restCfg *rest.Config
	health  *healthChecks
	log     logr.Logger
}

// NeedLeaderElection is true: providers are initialized and controllers run on
// the leader only.
func (s *controllerStarter) NeedLeaderElection() bool { return true }

// Start initializes the providers and starts the controllers; it returns when ctx
// is done and the informers have stopped.
func (s *controllerStarter) Start(ctx context.Context) error {
	leaderGauge.Set(1)
	defer leaderGauge.Set(0)
	builder := clientbuilder.SimpleControllerClientBuilder{ClientConfig: s.restCfg}
	for _, p := range s.clouds.Providers() {
		s.log.Info("initializing provider", "provider", p.Name())
		p.Initialize(builder, ctx.Done())
	}
	client, err := builder.Client("shared-informers")
	if err != nil {
		return fmt.Errorf("shared informers client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(client, s.opts.resyncPeriod())
	for _, p := range s.clouds.Providers() {
		if u, ok := p.Raw().(cloudprovider.InformerUser); ok {
			u.SetInformers(factory)
		}
	}
	if err := s.startControllers(); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	// Providers that watch their instances tell the controllers about changes
	// (the controllers subscribed as they were added).
	var watches sync.WaitGroup
	for _, p := range s.clouds.Providers() {
		watches.Go(func() { p.WatchInstances(ctx) })
	}
	<-ctx.Done()
	factory.Shutdown()
	watches.Wait()
	return nil
}

// startControllers adds every enabled controller and a health check for each one
// that started.
func (s *controllerStarter) startControllers() error {
	for _, c := range controllerTable {
		name := c.name
		if !controllerEnabled(name, s.opts.Controllers) {
			s.log.Info("controller is disabled by --controllers", "controller", name)
			continue
		}
		mgr, err := s.opts.forController(s.mgr, name)
		if err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		started, err := c.add(mgr, s.clouds, s.opts, s.cfg, s.log.WithValues("controller", name))
		if err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		if !started {
			klog.Warningf("controller %s is enabled but was not started", name)
			continue
		}
		s.log.Info("started controller", "controller", name)
		// As upstream, a started controller's check is a ping: it is registered
		// once the controller runs.
		s.health.add(name, func(*http.Request) error { return nil })
	}
	return nil
}

// stopReport is how controller-runtime logs an error that arrives while it
// stops; releasing the lease on a clean stop reports "leader election lost" so.
const stopReport = "error received after stop sequence was engaged"

// cleanStopSink is the manager's log sink. Once stopping is closed (SIGTERM) it
// logs at V(1), as information, the errors that the stop itself causes: the
// "leader election lost" that client-go reports when the manager releases the
// lease (--leader-elect), and calls cut short by the cancellation
// (context.Canceled, e.g. a lease renewal in flight). A clean stop is what was
// asked for, not an error. Every other error, and any error before the stop
// (a lease really lost), is logged as an error.
type cleanStopSink struct {
	logr.LogSink
	stopping <-chan struct{}
}

// cleanStopLogger is logger with a cleanStopSink.
func cleanStopLogger(logger logr.Logger, stopping <-chan struct{}) logr.Logger {
	sink := logger.GetSink()
	if sink == nil {
		return logger // discards everything anyway
	}
	// One more frame, the wrapper's, so that lines keep naming their caller.
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1)
	}
	return logr.New(cleanStopSink{LogSink: sink, stopping: stopping})
}

// Init does nothing: the wrapped sink was initialized by its own logger.
func (s cleanStopSink) Init(logr.RuntimeInfo) {}

// Info is the wrapped sink's; it is declared so that every line goes through
// the same number of frames.
func (s cleanStopSink) Info(level int, msg string, keysAndValues ...any) {
	s.LogSink.Info(level, msg, keysAndValues...)
}

// Error logs the errors a clean stop causes as V(1) information.
func (s cleanStopSink) Error(err error, msg string, keysAndValues ...any) {
	if s.causedByStop(err, msg) {
		if s.LogSink.Enabled(1) {
			s.LogSink.Info(1, msg, append(keysAndValues, "error", err.Error(), "stopping", true)...)
		}
		return
	}
	s.LogSink.Error(err, msg, keysAndValues...)
}

func (s cleanStopSink) causedByStop(err error, msg string) bool {
	select {
	case <-s.stopping:
	default:
		return false
	}
	return err != nil && (errors.Is(err, context.Canceled) || msg == stopReport && err.Error() == ErrLeaderElectionLost.Error())
}

// WithValues keeps the filter on the derived sink.
func (s cleanStopSink) WithValues(keysAndValues ...any) logr.LogSink {
	return cleanStopSink{LogSink: s.LogSink.WithValues(keysAndValues...), stopping: s.stopping}
}

// WithName keeps the filter on the derived sink.
func (s cleanStopSink) WithName(name string) logr.LogSink {
	return cleanStopSink{LogSink: s.LogSink.WithName(name), stopping: s.stopping}
}

// WithCallDepth keeps the filter on the derived sink.
func (s cleanStopSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return cleanStopSink{LogSink: cd.WithCallDepth(depth), stopping: s.stopping}
	}
	return s
}
