package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
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
		counted := ev.Stage == "ResponseComplete" && ev.Verb != "watch" || ev.Stage == "ResponseStarted" && ev.Verb == "watch"
		if !counted || ev.Received.Before(since) || strings.HasPrefix(ev.UserAgent, harnessAgent) || strings.HasPrefix(ev.UserAgent, "kube-apiserver") {
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
