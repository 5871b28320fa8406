package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The manager's requests are those neither the harness nor the API server
// made, answered after the reset; a watch counts when it starts.
func TestManagerRequests(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.log")
	lines := `{"stage":"ResponseComplete","verb":"patch","userAgent":"cloud-controller-manager/v1","requestReceivedTimestamp":"2026-12-01T10:00:05Z","objectRef":{"resource":"services","subresource":"status"}}
{"stage":"ResponseComplete","verb":"patch","userAgent":"cloud-controller-manager/v1","requestReceivedTimestamp":"2026-12-01T09:59:59Z","objectRef":{"resource":"services"}}
{"stage":"ResponseComplete","verb":"create","userAgent":"` + harnessAgent + `","requestReceivedTimestamp":"2026-12-01T10:00:06Z","objectRef":{"resource":"services"}}
{"stage":"ResponseComplete","verb":"list","userAgent":"kube-apiserver/v1.37.2","requestReceivedTimestamp":"2026-12-01T10:00:06Z","objectRef":{"resource":"leases"}}
{"stage":"ResponseStarted","verb":"watch","userAgent":"ccm/v1.37.2","requestReceivedTimestamp":"2026-12-01T10:00:07Z","objectRef":{"resource":"nodes"}}
{"stage":"ResponseComplete","verb":"watch","userAgent":"ccm/v1.37.2","requestReceivedTimestamp":"2026-12-01T10:00:07Z","objectRef":{"resource":"nodes"}}
{"stage":"ResponseComplete","verb":"create","userAgent":"ccm/v1.37.2","requestReceivedTimestamp":"2026-12-01T10:00:08Z","objectRef":{"resource":"events"}}
`
	if err := os.WriteFile(log, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	total, by, err := managerRequests(log, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"patch services/status": 1, "watch nodes": 1, "create events": 1}
	if total != 3 || len(by) != len(want) {
		t.Fatalf("total %d, by %v; want 3: %v", total, by, want)
	}
	for k, n := range want {
		if by[k] != n {
			t.Errorf("%s: %d, want %d", k, by[k], n)
		}
	}
}

// The tail reads only whole lines, each once, and remembers the latest
// manager request: a harness request after it does not move it.
func TestAuditTailLastManagerRequest(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.log")
	write := func(s string) {
		f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	tail := &auditTail{path: log}
	at := func(want string) {
		t.Helper()
		got, err := tail.lastManagerRequest()
		if err != nil {
			t.Fatal(err)
		}
		if w, _ := time.Parse(time.RFC3339, want); !got.Equal(w) && !(want == "" && got.IsZero()) {
			t.Errorf("last manager request %v, want %q", got, want)
		}
	}
	write("")
	at("")
	manager := `{"stage":"ResponseComplete","verb":"create","userAgent":"ccm/v1","requestReceivedTimestamp":"2026-12-01T10:00:0%dZ","objectRef":{"resource":"events"}}`
	write(strings.ReplaceAll(manager, "%d", "1") + "\n" + `{"stage":"ResponseComplete","verb":"create","userAgent":"` + harnessAgent + `","requestReceivedTimestamp":"2026-12-01T10:00:05Z"}` + "\n")
	at("2026-12-01T10:00:01Z")
	// Half a line: not read until its newline is there.
	line := strings.ReplaceAll(manager, "%d", "7")
	write(line[:40])
	at("2026-12-01T10:00:01Z")
	write(line[40:] + "\n")
	at("2026-12-01T10:00:07Z")
	at("2026-12-01T10:00:07Z")
}

func TestMedianRuns(t *testing.T) {
	med, spread := medianRuns([]Metrics{{"a": 3, "b": 1}, {"a": 1}, {"a": 10, "b": 3}})
	if med["a"] != 3 || med["b"] != 2 {
		t.Errorf("medians %v, want a=3 (middle of three) b=2 (mean of two)", med)
	}
	if spread["a"] != [2]float64{1, 10} || spread["b"] != [2]float64{1, 3} {
		t.Errorf("ranges %v", spread)
	}
	if m, _ := medianRuns(nil); m != nil {
		t.Errorf("median of no runs = %v, want nil", m)
	}
}
