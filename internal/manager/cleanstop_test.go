package manager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
)

// The manager's log sink turns into information only the errors a requested
// stop causes, and only once the stop was asked for.
func TestCleanStopSink(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{Verbosity: 1})
	stopping := make(chan struct{})
	logger := cleanStopLogger(base, stopping).WithName("manager").WithValues("k", "v")
	canceled := fmt.Errorf("renew lease: %w", context.Canceled)

	logger.Error(ErrLeaderElectionLost, stopReport) // a lease really lost
	logger.Error(canceled, "Error retrieving lease lock")
	close(stopping)
	logger.Error(errors.New("leader election lost"), stopReport)
	logger.Error(canceled, "Error retrieving lease lock")
	logger.Error(errors.New("other"), stopReport)
	logger.Info("still logged")

	var errs, infos []string
	for _, l := range lines {
		if !strings.Contains(l, `"k"="v"`) || !strings.HasPrefix(l, "manager ") {
			t.Errorf("line lost its name or values: %s", l)
		}
		if strings.Contains(l, `"error"=`) && !strings.Contains(l, `"stopping"=true`) {
			errs = append(errs, l)
		} else {
			infos = append(infos, l)
		}
	}
	if len(errs) != 3 || !strings.Contains(errs[0], "leader election lost") || !strings.Contains(errs[1], "canceled") || !strings.Contains(errs[2], `"other"`) {
		t.Errorf("errors logged:\n%s\nwant the lost lease and the canceled call before the stop, and the other error", strings.Join(errs, "\n"))
	}
	if len(infos) != 3 || !strings.Contains(infos[0], `"level"=1`) || !strings.Contains(infos[1], `"level"=1`) || !strings.Contains(infos[2], "still logged") {
		t.Errorf("information logged:\n%s\nwant the two errors of the stop at V(1), then the info line", strings.Join(infos, "\n"))
	}
}
