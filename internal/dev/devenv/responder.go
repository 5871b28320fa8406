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

// responder stands in for kube-proxy and a backend pod: it listens on ip
// ("" for every address) at the ports desiredPorts computes and follows
// Service changes through an informer. nodeAt names the node a connection
// reached by its local address; a connection to an address that names no
// node is reset, as a machine without the address refuses it.
type responder struct {
	name   string // for errors and logs
	ip     string
	client kubernetes.Interface
	nodeAt func(local net.Addr) (string, bool)
	// connState, if set, sees every connection's state (NodePorts closes
	// the connections of a node that stops).
	connState func(net.Conn, http.ConnState)

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
		return fmt.Errorf("%s: watch services: %w", r.name, err)
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
			return fmt.Errorf("%s: list services: %w", r.name, err)
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
		srv := &http.Server{Handler: r.handler(port), ReadHeaderTimeout: 5 * time.Second, ConnState: r.connState}
		r.listeners[port] = srv
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if err := srv.Serve(&nodeListener{Listener: ln, nodeAt: r.nodeAt}); err != nil && !errors.Is(err, http.ErrServerClosed) {
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
		local, _ := req.Context().Value(http.LocalAddrContextKey).(net.Addr)
		node, known := r.nodeAt(local)
		if !ok || !known {
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
			_ = json.NewEncoder(w).Encode(Reply{Node: node, Namespace: route.namespace, Service: route.name, Port: route.servicePort})
		}
	})
}

// nodeListener resets every accepted connection whose local address names
// no node.
type nodeListener struct {
	net.Listener
	nodeAt func(net.Addr) (string, bool)
}

func (l *nodeListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if _, ok := l.nodeAt(c.LocalAddr()); ok {
			return c, nil
		}
		resetConn(c)
	}
}

// resetConn closes c with a TCP reset, as a refused or dead peer answers.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// NodePorts answers the NodePorts of LoadBalancer Services for many
// simulated nodes at once: one listener per port on every address, which
// tells the node from the address the connection reached. A Kubelet with
// Ports set answers through it instead of listening on each port at its own
// IP, so that the listening sockets grow with the Services' ports and not
// with nodes × ports (a cluster of hundreds of nodes and Services would
// otherwise need hundreds of thousands). Binding every address takes each
// node port on the whole host: use it where no other program listens on
// node ports (in its own network namespace, say).
type NodePorts struct {
	// Client talks to the API server.
	Client kubernetes.Interface

	mu    sync.RWMutex
	nodes map[string]string   // IP → node name
	conns map[net.Conn]string // open connections → the IP they reached
}

// Run serves until ctx is done.
func (n *NodePorts) Run(ctx context.Context) error {
	r := &responder{name: "node ports", client: n.Client, nodeAt: n.nodeAt, connState: n.track}
	return r.run(ctx)
}

func (n *NodePorts) nodeAt(local net.Addr) (string, bool) {
	ip := addrIP(local)
	n.mu.RLock()
	defer n.mu.RUnlock()
	node, ok := n.nodes[ip]
	return node, ok
}

func (n *NodePorts) track(c net.Conn, state http.ConnState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch state {
	case http.StateNew:
		if n.conns == nil {
			n.conns = map[net.Conn]string{}
		}
		n.conns[c] = addrIP(c.LocalAddr())
	case http.StateClosed, http.StateHijacked:
		delete(n.conns, c)
	}
}

// add makes node answer at ip until the returned function is called, which
// also resets the node's open connections (a stopped machine's connections
// die with it).
func (n *NodePorts) add(ip, node string) (remove func()) {
	n.mu.Lock()
	if n.nodes == nil {
		n.nodes = map[string]string{}
	}
	n.nodes[ip] = node
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.nodes[ip] == node {
			delete(n.nodes, ip)
		}
		for c, at := range n.conns {
			if at == ip {
				resetConn(c)
				delete(n.conns, c)
			}
		}
	}
}

// addrIP is the IP of a TCP address ("" for another kind).
func addrIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return ""
}
