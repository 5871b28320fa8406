package testsupport

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
)

func TestFreePortCanBeBound(t *testing.T) {
	port := FreePort(t)
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("listen on the free port %d: %v", port, err)
	}
	ln.Close()
}

func TestLockedBufferConcurrentWrites(t *testing.T) {
	var b LockedBuffer
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fmt.Fprintf(&b, "%d\n", i)
			_ = b.String()
		}()
	}
	wg.Wait()
	if got := len(b.String()); got != 20 {
		t.Errorf("%d bytes written, want 20: %q", got, b.String())
	}
}
