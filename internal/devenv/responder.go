package devenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// portKind says what a node port serves.
type portKind int

const (
	// trafficPort is a Service's NodePort: the backend pod's reply.
	trafficPort portKind = iota
	// healthPort is a Service's healthCheckNodePort: kube-proxy's /healthz.
	healthPort
)

// portRoute is what one TCP port on the node answers.
type portRoute struct {
	kind            portKind
	namespace, name string
	servicePort     int32
	servicePortName string
}

// desiredPorts computes, from the Services, what each node port answers:
// every TCP NodePort of a LoadBalancer Service, and its healthCheckNodePort.
func desiredPorts(services []*corev1.Service) map[int]portRoute {
	out := map[int]portRoute{}
	for _, svc := range services {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		for _, p := range svc.Spec.Ports {
			if p.NodePort == 0 || (p.Protocol != "" && p.Protocol != corev1.ProtocolTCP) {
				continue
			}
			out[int(p.NodePort)] = portRoute{kind: trafficPort, namespace: svc.Namespace, name: svc.Name, servicePort: p.Port, servicePortName: p.Name}
		}
		if hc := svc.Spec.HealthCheckNodePort; hc != 0 {
			out[int(hc)] = portRoute{kind: healthPort, namespace: svc.Namespace, name: svc.Name}
		}
	}
	return out
}

// Reply is the body a node's NodePort answers with: which node and which
// Service the request reached.
type Reply struct {
	Node      string `json:"node"`
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	Port      int32  `json:"port"`
}

// responder stands in for kube-proxy and a backend pod on one node: it
// listens on ip at the ports desiredPorts computes and follows Service
// changes through an informer.
type responder struct {
	node   string
	ip     string
	client kubernetes.Interface

	routes    atomic.Pointer[map[int]portRoute]
	mu        sync.Mutex
	listeners map[int]*http.Server
	wg        sync.WaitGroup
}

func (r *responder) run(ctx context.Context) error {
	logger := log.FromContext(ctx)
	r.listeners = map[int]*http.Server{}
	factory := informers.NewSharedInformerFactory(r.client, 0)
	svcInformer := factory.Core().V1().Services()
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := svcInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}); err != nil {
		return fmt.Errorf("node %s: watch services: %w", r.node, err)
	}
	factory.Start(ctx.Done())
	defer func() {
		factory.Shutdown()
		r.closeAll()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), svcInformer.Informer().HasSynced) {
		return nil // stopped before the first listing
	}
	lister := svcInformer.Lister()
	for {
		svcs, err := lister.List(labels.Everything())
		if err != nil {
			return fmt.Errorf("node %s: list services: %w", r.node, err)
		}
		r.reconcile(ctx, desiredPorts(svcs))
		select {
		case <-ctx.Done():
			logger.V(1).Info("node port responder stopped")
			return nil
		case <-changed:
		}
	}
}

// reconcile opens listeners for new ports and closes those no Service uses.
func (r *responder) reconcile(ctx context.Context, want map[int]portRoute) {
	r.routes.Store(&want)
	r.mu.Lock()
	defer r.mu.Unlock()
	for port, srv := range r.listeners {
		if _, ok := want[port]; !ok {
			srv.Close()
			delete(r.listeners, port)
		}
	}
	for port := range want {
		if _, ok := r.listeners[port]; ok {
			continue
		}
		addr := net.JoinHostPort(r.ip, strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			// A port another program holds; the next Service change retries.
			log.FromContext(ctx).Info("cannot listen on node port", "address", addr, "error", err.Error())
			continue
		}
		srv := &http.Server{Handler: r.handler(port), ReadHeaderTimeout: 5 * time.Second}
		r.listeners[port] = srv
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.FromContext(ctx).Info("node port listener failed", "address", addr, "error", err.Error())
			}
		}()
	}
}

func (r *responder) closeAll() {
	r.mu.Lock()
	for port, srv := range r.listeners {
		srv.Close()
		delete(r.listeners, port)
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// handler answers as the backend pod (traffic ports) or as kube-proxy's
// health check server (health ports; every simulated node has a local
// endpoint, so it is always healthy).
func (r *responder) handler(port int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		route, ok := (*r.routes.Load())[port]
		if !ok {
			http.Error(w, "no service on this node port", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch route.kind {
		case healthPort:
			_ = json.NewEncoder(w).Encode(map[string]any{
				"service":        map[string]string{"namespace": route.namespace, "name": route.name},
				"localEndpoints": 1,
			})
		default:
			_ = json.NewEncoder(w).Encode(Reply{Node: r.node, Namespace: route.namespace, Service: route.name, Port: route.servicePort})
		}
	})
}
