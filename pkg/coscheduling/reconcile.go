package coscheduling

import (
	"context"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/leading"
)

// The plugin learns from the scheduler when its scheduling loop starts,
// and only then lets its claim reconciler write.
var _ leading.Follower = &Plugin{}

// startReconciler joins the scheduler's claim reconciler (one for all its
// profiles, dra.ReconcilerFor), building and running it if this plugin is
// the first, and tells it which attempts are this plugin's.
func (pl *Plugin) startReconciler(ctx context.Context, handle fwk.Handle) *dra.Reconciler {
	claims := handle.SharedInformerFactory().Resource().V1().ResourceClaims()
	manager := handle.SharedDRAManager()
	r := dra.ReconcilerFor(ctx, manager, func() *dra.Reconciler {
		releaser := &dra.Releaser{Client: handle.ClientSet().ResourceV1(), Tracker: manager.ResourceClaims(), Backoff: dra.DefaultBackoff}
		grace := time.Duration(pl.args.ClaimReleaseGraceSeconds) * time.Second
		return dra.NewReconciler(claims.Lister(), releaser, handle.EventRecorder(), pl.clock, grace)
	}, claims.Informer().HasSynced)
	r.Track(pl.claims)
	r.Track(liveAttempts{pl})
	return r
}

// StartedLeading lets the claim reconciler write: the scheduler calls it
// when its scheduling loop starts, in the replica that holds the lease.
func (pl *Plugin) StartedLeading() {
	if pl.reconciler != nil {
		pl.reconciler.Lead()
	}
}

// liveAttempts says a mark is live while its gang has an attempt in
// flight (planned and not past its deadline, its members reserving or
// waiting in Permit) or is binding. The attempt may use an allocation an
// earlier one wrote (it adopts it before its members reserve), so any mark
// of the gang counts. The write table (dra.Allocations) is tracked beside
// it for the writes and releases in flight.
type liveAttempts struct{ pl *Plugin }

func (l liveAttempts) Live(m dra.Mark) bool {
	if _, inFlight := l.pl.ledger.Reservations.Remaining(m.Gang); inFlight {
		return true
	}
	return l.pl.binding(m.Gang)
}

// binding reports whether a member of the gang reserved a node and has not
// bound yet. Permit has let it go, and DynamicResources writes the claim's
// reservedFor only in the member's PreBind, so until then a shared claim's
// allocation has no consumer the API shows; a gang of hundreds behind the
// client's rate limit can take longer than the grace to get there. When
// the gang's members cannot be read it counts as binding: the reconciler
// then waits for the next pass.
func (pl *Plugin) binding(key gang.Key) bool {
	reserved := pl.ledger.Reservations.ReservedBy(key)
	if len(reserved) == 0 {
		return false
	}
	members, err := pl.members(key)
	if err != nil {
		return true
	}
	for _, p := range members {
		if _, ok := reserved[p.UID]; ok && p.Spec.NodeName == "" {
			return true
		}
	}
	return false
}
