package minicloud_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// backend is a real server on an instance IP: TCP connections get its name
// and then an echo; UDP datagrams are answered with "name:payload"; an
// optional HTTP health endpoint answers 200 or 503.
type backend struct {
	t    *testing.T
	name string
	ip   string
	port int

	mu  sync.Mutex
	tcp net.Listener
	udp net.PacketConn
	wg  sync.WaitGroup

	healthy atomic.Bool
}

// startBackend listens on ip:port (port 0 = any free port) for TCP and/or
// UDP and, with healthPort > 0, serves /healthz there.
func startBackend(t *testing.T, name, ip string, port int, tcp, udp bool, healthPort int) *backend {
	t.Helper()
	b := &backend{t: t, name: name, ip: ip, port: port}
	b.healthy.Store(true)
	if tcp {
		b.listenTCP()
	}
	if udp {
		pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, strconv.Itoa(b.port)))
		if err != nil {
			t.Fatalf("backend %s: %v", name, err)
		}
		b.port = pc.LocalAddr().(*net.UDPAddr).Port
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
	if healthPort > 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(healthPort)))
		if err != nil {
			t.Fatalf("backend %s health: %v", name, err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/healthz" && b.healthy.Load() {
				w.WriteHeader(http.StatusOK)
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	t.Cleanup(func() {
		b.stopTCP()
		if b.udp != nil {
			b.udp.Close()
		}
		b.wg.Wait()
	})
	return b
}

func (b *backend) listenTCP() {
	b.t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(b.ip, strconv.Itoa(b.port)))
	if err != nil {
		b.t.Fatalf("backend %s: %v", b.name, err)
	}
	b.port = ln.Addr().(*net.TCPAddr).Port
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
				fmt.Fprintf(c, "%s\n", b.name)
				io.Copy(c, c)
			}()
		}
	}()
}

func (b *backend) stopTCP() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tcp != nil {
		b.tcp.Close()
		b.tcp = nil
	}
}

// dialVIP connects to addr (from local, when not empty) and returns the
// name of the backend that answered, or an error.
func dialVIP(addr, local string) (string, net.Conn, error) {
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

// hits opens n connections to addr and counts the answering backends.
func hits(t *testing.T, addr string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		name, c, err := dialVIP(addr, "")
		if err != nil {
			t.Fatalf("connect through %s: %v", addr, err)
		}
		c.Close()
		got[name]++
	}
	return got
}

// udpAsk sends payload to addr from a fresh socket and returns the answer.
func udpAsk(addr, payload string) (string, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	buf := make([]byte, 2048)
	// Datagrams may be lost; retry a few times within the deadline.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := c.Write([]byte(payload)); err != nil {
			return "", err
		}
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Read(buf)
		if err == nil {
			return string(buf[:n]), nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			// ICMP unreachable while the listener starts: retry.
			continue
		}
	}
	return "", fmt.Errorf("no UDP answer from %s", addr)
}

// refused reports whether nothing accepts connections at addr.
func refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return true
	}
	c.Close()
	return false
}
