package manager

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
)

// TestLeaseTakenStopsTheLeaderAtOnce: a leader whose lease another replica
// holds when it next reads it (it was paused past the lease) is told at that
// read, not at its renew deadline; a standby reading the same is not.
func TestLeaseTakenStopsTheLeaderAtOnce(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	o := NewOptions()
	o.ResourceNamespace = env.Namespace(t)
	o.ResourceName = "stratus-test"
	newLock := func() (*watchedLock, *[]string) {
		l, err := newLeaseLock(o, env.Config)
		if err != nil {
			t.Fatal(err)
		}
		var taken []string
		l.onTaken = func(holder string) { taken = append(taken, holder) }
		return l, &taken
	}
	leader, leaderTaken := newLock()
	standby, standbyTaken := newLock()

	now := metav1.NewTime(time.Now())
	if err := leader.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: leader.Identity(), LeaseDurationSeconds: 6, AcquireTime: now, RenewTime: now}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := leader.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if len(*leaderTaken) != 0 {
		t.Fatalf("leader told the lease is taken while it holds it: %v", *leaderTaken)
	}

	// The standby takes the lease over (as after the leader's lease expired).
	if _, _, err := standby.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := standby.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: standby.Identity(), LeaseDurationSeconds: 6, AcquireTime: now, RenewTime: now, LeaderTransitions: 1}); err != nil {
		t.Fatal(err)
	}
	if len(*standbyTaken) != 0 {
		t.Fatalf("standby told the lease is taken: %v", *standbyTaken)
	}

	rec, _, err := leader.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rec.HolderIdentity != standby.Identity() {
		t.Fatalf("holder %q, want the standby %q", rec.HolderIdentity, standby.Identity())
	}
	if len(*leaderTaken) != 1 || (*leaderTaken)[0] != standby.Identity() {
		t.Fatalf("leader told %v, want once, naming %q", *leaderTaken, standby.Identity())
	}
	// stratus_leader_lease_transitions is the lease's count as last read.
	if n := testutil.ToFloat64(leaseTransitions.WithLabelValues(o.ResourceNamespace + "/" + o.ResourceName)); n != 1 {
		t.Errorf("stratus_leader_lease_transitions %v after reading a lease with 1 transition", n)
	}
	// Once: the next read (client-go retries until its renew deadline, then
	// reads again to release) does not tell it again.
	if _, _, err := leader.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if len(*leaderTaken) != 1 {
		t.Fatalf("leader told %d times, want once", len(*leaderTaken))
	}
}
