package coscheduling

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Members that share one ResourceClaim are planned together and their
// claim allocated by the plugin itself (dra.GangClaims, which says why).
// What is left here is what GangClaims asks of the plugin: its gangs.

// ErrReasonClaimsWriting starts the status of a member whose gang waits
// for the claims its members share to be written, adopted or given back.
const ErrReasonClaimsWriting = dra.ErrReasonClaimsWriting

// claimsDone is package dra's word that a write, adoption or release for
// the gang ended: the tracker changed, and its members may schedule.
func (pl *Plugin) claimsDone(key gang.Key) {
	pl.devices.ClaimsChanged()
	pl.activate(key)
}

// claimGangs is the plugin as dra.GangClaims sees it.
type claimGangs struct{ pl *Plugin }

var _ dra.Gangs = claimGangs{}

func (g claimGangs) UnitOf(pod *v1.Pod) (gang.Key, bool) { return g.pl.unitOf(pod) }

func (g claimGangs) Reserved(key gang.Key, pod types.UID) bool {
	_, reserved := g.pl.ledger.Reservations.ReservedBy(key)[pod]
	return reserved
}

func (g claimGangs) Reject(ctx context.Context, key gang.Key, why string, penalize bool) {
	g.pl.failGang(ctx, key, ReasonGangRejected, why, penalize)
}

func (g claimGangs) Fail(ctx context.Context, key gang.Key, reason, why string, penalize bool) {
	g.pl.failGang(ctx, key, reason, why, penalize)
}

func (g claimGangs) KeepOff(key gang.Key, signatures []string, node string) bool {
	learned := false
	for _, sig := range signatures {
		if g.pl.ledger.Lessons.LearnExclusion(key, sig, node) {
			learned = true
		}
	}
	g.pl.ledger.FailPlan(key)
	return learned
}

func (g claimGangs) Signature(pod *v1.Pod, request capacity.Amounts) string {
	return eligibility.FilterSignature(pod, request)
}

func (g claimGangs) Event(ref *v1.ObjectReference, related *v1.Pod, eventType, reason, format string, args ...any) {
	g.pl.events.gangObject(ref, related, eventType, reason, format, args...)
}
