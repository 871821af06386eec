package coscheduling

import (
	"context"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/leading"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
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
	r.Track(liveAttempts{pl.ledger.Claims})
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
// flight: planned, its members reserving or waiting in Permit. The
// attempt may use an allocation an earlier one wrote (it adopts it before
// its members reserve), so any mark of the gang counts. The write table
// (dra.Allocations) is tracked beside it for the writes and releases in
// flight.
type liveAttempts struct{ claims *ledger.Claims }

func (l liveAttempts) Live(m dra.Mark) bool {
	_, inFlight := l.claims.Fingerprint(m.Gang)
	return inFlight
}
