package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// harnessAgent is the user agent of the harness's own Kubernetes client:
// the API server's audit log tells its requests from the manager's by it.
const harnessAgent = "stratus-bench-harness"

// auditPolicy records every request's metadata (no bodies) once it is
// answered, and a watch when it starts (it is answered only when it ends).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// auditArgs writes the audit policy into dir and returns kube-apiserver's
// flags that log to dir/audit.log, and that log's path.
func auditArgs(dir string) ([]string, string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, "", err
	}
	log := filepath.Join(dir, "audit.log")
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + log, "--audit-log-format=json", "--audit-log-maxsize=0"}, log, nil
}

// auditEvent is the part of an audit event the count needs.
type auditEvent struct {
	Stage     string    `json:"stage"`
	Verb      string    `json:"verb"`
	UserAgent string    `json:"userAgent"`
	Received  time.Time `json:"requestReceivedTimestamp"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
}

// byManager tells whether ev is the record of one request the manager made:
// answered (a watch once it started), made by neither the harness nor the
// API server itself.
func (ev auditEvent) byManager() bool {
	counted := ev.Stage == "ResponseComplete" && ev.Verb != "watch" || ev.Stage == "ResponseStarted" && ev.Verb == "watch"
	return counted && !strings.HasPrefix(ev.UserAgent, harnessAgent) && !strings.HasPrefix(ev.UserAgent, "kube-apiserver")
}

// managerRequests counts the requests the API server answered since since
// that neither the harness nor the API server itself made: the manager's.
// It returns the total and the counts by "verb resource[/subresource]".
func managerRequests(path string, since time.Time) (int, map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	total, by := 0, map[string]int{}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for s.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(s.Bytes(), &ev); err != nil {
			return 0, nil, fmt.Errorf("audit log %s: %w", path, err)
		}
		if !ev.byManager() || ev.Received.Before(since) {
			continue
		}
		what := ev.Verb
		if ev.ObjectRef != nil {
			what += " " + ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				what += "/" + ev.ObjectRef.Subresource
			}
		}
		total++
		by[what]++
	}
	return total, by, s.Err()
}

// auditTail follows the audit log as it grows and remembers when the
// manager's latest request was received.
type auditTail struct {
	path string
	off  int64
	last time.Time
}

// lastManagerRequest reads what the log gained since the previous call (whole
// lines only) and returns when the latest manager request of the log so far
// was received (zero if none).
func (t *auditTail) lastManagerRequest() (time.Time, error) {
	f, err := os.Open(t.path)
	if err != nil {
		return time.Time{}, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return time.Time{}, fmt.Errorf("audit log %s: %w", t.path, err)
	}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			// A line without its newline is still being written.
			return t.last, nil
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("audit log %s: %w", t.path, err)
		}
		t.off += int64(len(line))
		var ev auditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return time.Time{}, fmt.Errorf("audit log %s: %w", t.path, err)
		}
		if ev.byManager() && ev.Received.After(t.last) {
			t.last = ev.Received
		}
	}
}
