package testsupport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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

func TestPollWaitsForTheCondition(t *testing.T) {
	calls := 0
	err := poll(10*time.Second, func(context.Context) (bool, error) {
		calls++
		return calls == 3, nil
	})
	if err != nil || calls != 3 {
		t.Errorf("poll = %v after %d calls; want nil after 3", err, calls)
	}
}

func TestPollStopsOnError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	err := poll(10*time.Second, func(context.Context) (bool, error) {
		calls++
		return false, boom
	})
	if !errors.Is(err, boom) || calls != 1 {
		t.Errorf("poll = %v after %d calls; want boom after 1", err, calls)
	}
}

func TestPollTimesOut(t *testing.T) {
	err := poll(20*time.Millisecond, func(ctx context.Context) (bool, error) { return false, nil })
	if err == nil || !strings.Contains(err.Error(), "not within 20ms") {
		t.Errorf("poll of a condition that never holds = %v; want a timeout", err)
	}
}

func TestConsistentlyHolds(t *testing.T) {
	calls := 0
	Consistently(t, 50*time.Millisecond, "the condition", func(context.Context) (bool, string) {
		calls++
		return true, ""
	})
	if calls < 2 {
		t.Errorf("cond checked %d times in 50ms; want several", calls)
	}
}

func TestDescendantsFindsAGrandchild(t *testing.T) {
	// sh starts sleep as its child: both are below this process.
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range Descendants(cmd.Process.Pid) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	EventuallyState(t, 10*time.Second, "sleep below sh", func(context.Context) (bool, string) {
		d := Descendants(os.Getpid())
		var names []string
		for _, p := range d {
			names = append(names, ProcName(p))
		}
		return slices.Contains(Children(os.Getpid()), cmd.Process.Pid) && slices.Contains(names, "sleep"), fmt.Sprint(names)
	})
}
