// Package testsupport holds the small helpers that tests across the repository
// need alike (a free port, a buffer a process writes to while the test reads
// it, waiting on a condition with a deadline, the processes below a process),
// so that each exists once. It is imported by tests and test harnesses only.
package testsupport

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// FreePort returns a loopback TCP port that was free a moment ago. Another
// process may take it before the caller binds it; callers that can bind
// port 0 themselves should.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// LockedBuffer is a strings.Builder safe for one writer (e.g. a child
// process's output) and concurrent readers.
type LockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// DumpLogs logs the end (the last 4,000 bytes) of every file in dir, the
// components' logs of a failed test.
func DumpLogs(t testing.TB, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		t.Logf("--- %s (end) ---\n%s", e.Name(), data)
	}
}
