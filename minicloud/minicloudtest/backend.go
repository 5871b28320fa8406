package minicloudtest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratus-ccm/stratus/minicloud/dataplane"
)

// Backend is a real server on an instance IP, the target of load
// balancers in tests: a TCP connection first receives the backend's name
// and a newline, then an echo of what it sends; a UDP datagram is answered
// with "name:payload"; the optional HTTP health endpoint /healthz answers
// 200 while healthy and 503 otherwise. A backend started with ProxyProtocol
// first reads a PROXY protocol v2 header from every TCP connection, as a
// server configured for it does, and closes connections without one.
type Backend struct {
	// Name identifies the backend in its answers.
	Name string
	// IP and Port are where it listens (TCP and UDP share the port).
	IP   string
	Port int

	t testing.TB

	mu  sync.Mutex
	tcp net.Listener
	udp net.PacketConn
	wg  sync.WaitGroup

	healthy atomic.Bool
	hang    atomic.Bool
	probes  []Probe

	proxy   bool
	clients []string // sources from PROXY headers, in arrival order
}

// BackendOptions say what a Backend serves.
type BackendOptions struct {
	// TCP and UDP select the protocols served on Port.
	TCP, UDP bool
	// Port is the port to listen on; 0 picks a free one (see Backend.Port),
	// which keeps parallel tests apart.
	Port int
	// HealthPort, when not 0, serves HTTP /healthz on IP:HealthPort.
	HealthPort int
	// ProxyProtocol makes TCP connections start with a PROXY protocol v2
	// header (see ProxyClients); connections without one get no answer.
	ProxyProtocol bool
}

// StartBackend starts a backend on ip until the test ends.
func StartBackend(t testing.TB, name, ip string, o BackendOptions) *Backend {
	t.Helper()
	b := &Backend{t: t, Name: name, IP: ip, Port: o.Port, proxy: o.ProxyProtocol}
	b.healthy.Store(true)
	if o.TCP {
		b.RestartTCP()
	}
	if o.UDP {
		pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, strconv.Itoa(b.Port)))
		if err != nil {
			t.Fatalf("backend %s: %v", name, err)
		}
		b.Port = pc.LocalAddr().(*net.UDPAddr).Port
		b.udp = pc
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			buf := make([]byte, 2048)
			for {
				n, src, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				pc.WriteTo([]byte(name+":"+string(buf[:n])), src)
			}
		}()
	}
	if o.HealthPort > 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(o.HealthPort)))
		if err != nil {
			t.Fatalf("backend %s health: %v", name, err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			if b.hang.Load() {
				// Answer nothing until the prober gives up and hangs up.
				<-r.Context().Done()
				b.logProbe(Probe{At: start, Hung: time.Since(start)})
				return
			}
			status := http.StatusServiceUnavailable
			if r.URL.Path == "/healthz" && b.healthy.Load() {
				status = http.StatusOK
			}
			b.logProbe(Probe{At: start, Status: status})
			w.WriteHeader(status)
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	t.Cleanup(func() {
		b.StopTCP()
		if b.udp != nil {
			b.udp.Close()
		}
		b.wg.Wait()
	})
	return b
}

// SetHealthy makes /healthz answer 200 (true) or 503 (false).
func (b *Backend) SetHealthy(ok bool) { b.healthy.Store(ok) }

// SetHanging makes /healthz answer nothing (true) until the prober closes
// the connection, as a wedged server does; false answers again.
func (b *Backend) SetHanging(hang bool) { b.hang.Store(hang) }

// Probe is one request to the backend's HTTP health endpoint.
type Probe struct {
	// At is when the request arrived.
	At time.Time
	// Status is the HTTP status answered; 0 when the backend was hanging.
	Status int
	// Hung is how long a hanging backend held the request before the
	// prober hung up.
	Hung time.Duration
}

// Probes returns the requests to the health endpoint so far, in order.
func (b *Backend) Probes() []Probe {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.probes)
}

func (b *Backend) logProbe(p Probe) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probes = append(b.probes, p)
}

// RestartTCP listens for TCP on IP:Port (again, after StopTCP).
func (b *Backend) RestartTCP() {
	b.t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(b.IP, strconv.Itoa(b.Port)))
	if err != nil {
		b.t.Fatalf("backend %s: %v", b.Name, err)
	}
	b.Port = ln.Addr().(*net.TCPAddr).Port
	b.mu.Lock()
	b.tcp = ln
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				defer c.Close()
				var in io.Reader = c
				if b.proxy {
					r := bufio.NewReader(c)
					src, err := dataplane.ReadProxyHeader(r)
					if err != nil {
						b.t.Logf("backend %s: %v", b.Name, err)
						return
					}
					b.mu.Lock()
					b.clients = append(b.clients, src)
					b.mu.Unlock()
					in = r
				}
				fmt.Fprintf(c, "%s\n", b.Name)
				io.Copy(c, in)
			}()
		}
	}()
}

// ProxyClients returns the client addresses (ip:port) the PROXY headers
// of the backend's TCP connections carried, in arrival order.
func (b *Backend) ProxyClients() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.clients)
}

// StopTCP closes the TCP listener, so connections to the backend are
// refused (established ones continue until the test ends).
func (b *Backend) StopTCP() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tcp != nil {
		b.tcp.Close()
		b.tcp = nil
	}
}

// DialTCP connects to addr (from the local IP, when not empty) and returns
// the name of the Backend that answered and the open connection, or an
// error when the connection fails or is closed without an answer.
func DialTCP(addr, local string) (string, net.Conn, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		c.Close()
		return "", nil, fmt.Errorf("read from %s: %w", addr, err)
	}
	c.SetReadDeadline(time.Time{})
	return strings.TrimSpace(line), c, nil
}

// CountTCP opens n connections to addr, one after the other, and counts
// the answering backends by name.
func CountTCP(t testing.TB, addr string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		name, c, err := DialTCP(addr, "")
		if err != nil {
			t.Fatalf("connect through %s: %v", addr, err)
		}
		c.Close()
		got[name]++
	}
	return got
}

// AskUDP sends payload to addr from a fresh socket (a new session) and
// returns the answer, retrying for up to 3 seconds since datagrams can be
// lost.
func AskUDP(addr, payload string) (string, error) {
	return AskUDPFrom(addr, "", payload, 3*time.Second)
}

// AskUDPFrom is AskUDP from the local IP (when not empty), giving up after
// timeout.
func AskUDPFrom(addr, local, payload string, timeout time.Duration) (string, error) {
	d := net.Dialer{}
	if local != "" {
		d.LocalAddr = &net.UDPAddr{IP: net.ParseIP(local)}
	}
	c, err := d.Dial("udp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	buf := make([]byte, 2048)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, err := c.Write([]byte(payload)); err != nil {
			return "", err
		}
		attempt := time.Now().Add(min(300*time.Millisecond, time.Until(deadline)))
		c.SetReadDeadline(attempt)
		n, err := c.Read(buf)
		if err == nil {
			return string(buf[:n]), nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			// ICMP port unreachable (the listener is not up yet): pace
			// the retries instead of spinning.
			<-time.After(time.Until(attempt))
		}
	}
	return "", fmt.Errorf("no UDP answer from %s within %s", addr, timeout)
}

// Refused reports whether nothing accepts TCP connections at addr.
func Refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return true
	}
	c.Close()
	return false
}
