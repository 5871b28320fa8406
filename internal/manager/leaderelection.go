package manager

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaderWatchdogTolerance is how long past the lease duration a leader may go
// without renewing before /healthz fails; upstream uses 20s.
const leaderWatchdogTolerance = 20 * time.Second

// watchedLock is the Lease lock with a record of this replica's last successful
// write, so that /healthz can report a leader that is stuck and no longer
// renewing (upstream's leader-election watchdog), and that stops a leader the
// moment it reads that another replica holds the lease.
//
// client-go's elector, renewing and finding the lease held by another replica
// (this process was paused past its lease: a long GC pause, a frozen VM),
// keeps retrying until its renew deadline before it stops leading; the chaos
// run measured a resumed leader acting on the cloud for 4 s next to its
// successor. Get calls onTaken instead as soon as it reads another holder
// while this replica's last write made it the holder.
type watchedLock struct {
	resourcelock.Interface

	// onTaken, if set, is called (once per lead) with the other holder's
	// identity.
	onTaken func(holder string)

	mu        sync.Mutex
	lastWrite time.Time
	// leading is true while this replica's last successful write named it
	// the holder.
	leading bool
}

// newLeaseLock returns the --leader-elect-resource-namespace/name Lease lock with
// identity <hostname>_<uuid>, as upstream.
func newLeaseLock(o *Options, cfg *rest.Config) (*watchedLock, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election identity: %w", err)
	}
	lock, err := resourcelock.NewFromKubeconfig(resourcelock.LeasesResourceLock, o.ResourceNamespace, o.ResourceName,
		resourcelock.ResourceLockConfig{Identity: host + "_" + uuid.NewString()},
		rest.AddUserAgent(ownBucket(cfg), "leader-election"), o.RenewDeadline)
	if err != nil {
		return nil, fmt.Errorf("leader election lock %s/%s: %w", o.ResourceNamespace, o.ResourceName, err)
	}
	return &watchedLock{Interface: lock}, nil
}

// Get reads the lease and, when this replica led and another one holds it now,
// calls onTaken.
func (l *watchedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil && rec != nil {
		leaseTransitions.WithLabelValues(l.Describe()).Set(float64(rec.LeaderTransitions))
	}
	if err != nil || rec == nil || rec.HolderIdentity == "" || rec.HolderIdentity == l.Identity() {
		return rec, raw, err
	}
	l.mu.Lock()
	taken := l.leading
	l.leading = false
	l.mu.Unlock()
	if taken && l.onTaken != nil {
		l.onTaken(rec.HolderIdentity)
	}
	return rec, raw, err
}

// Create records a successful acquisition.
func (l *watchedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, ler)
	l.record(ler, err)
	return err
}

// Update records a successful renewal (or release).
func (l *watchedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, ler)
	l.record(ler, err)
	return err
}

func (l *watchedLock) record(ler resourcelock.LeaderElectionRecord, err error) {
	if err != nil {
		return
	}
	leaseTransitions.WithLabelValues(l.Describe()).Set(float64(ler.LeaderTransitions))
	l.mu.Lock()
	l.lastWrite = time.Now()
	l.leading = ler.HolderIdentity == l.Identity()
	l.mu.Unlock()
}

// checker fails while this replica leads (elected is closed) but has not renewed
// the lease for longer than the lease duration plus the tolerance.
func (l *watchedLock) checker(elected <-chan struct{}, leaseDuration time.Duration) func(*http.Request) error {
	return func(*http.Request) error {
		select {
		case <-elected:
		default:
			return nil // standby: healthy
		}
		l.mu.Lock()
		last := l.lastWrite
		l.mu.Unlock()
		if since := time.Since(last); since > leaseDuration+leaderWatchdogTolerance {
			return fmt.Errorf("leader has not renewed the lease for %s", since.Round(time.Second))
		}
		return nil
	}
}
