package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

// In a window the watches are check rows, not requests: the hourly figure
// is every other request, scaled; a count of one burst is all of them.
func TestWindowCountsWatchesApart(t *testing.T) {
	by := map[string]int{"watch nodes": 1, "watch services": 1, "patch nodes/status": 2}
	got := Metrics{}
	addRequestMetrics(got, 4, by, 12)
	want := Metrics{
		"kubeAPIRequestsPerHour":                    24,
		"kubeAPIRequestsPerHour patch nodes/status": 24,
		watchesInWindow:                             2,
		watchesInWindow + ": nodes":                 1,
		watchesInWindow + ": services":              1,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("window (-want +got):\n%s", d)
	}
	rung := "nodes=01000 " + watchesInWindow
	if r := ratios(Metrics{watchesInWindow: 1, rung: 1}, Metrics{watchesInWindow: 2, rung: 2}); len(r) != 0 {
		t.Errorf("watches in a window got ratios %v; they are check rows", r)
	}
	burst := Metrics{}
	addRequestMetrics(burst, 4, by, 1)
	if burst["kubeAPIRequests"] != 4 || burst["kubeAPIRequests watch nodes"] != 1 {
		t.Errorf("a burst's count: %v; want all 4 requests, watches included", burst)
	}
}
