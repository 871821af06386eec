package coscheduling

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// sharedClaimGang is a gang of two members that share the named claim
// node-gpus for the 8 GPUs of the one DRA node.
func sharedClaimGang(t *testing.T) (*testEnv, []*v1.Pod) {
	t.Helper()
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "node-gpus", UID: "uid-node-gpus", ResourceVersion: "1"},
		Spec:       gpuClaimSpec(scheduling.DeviceClassGPU, 8, ""),
	}
	job := members("rl", 2, "")
	for _, p := range job {
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(claim.Name)}}
	}
	env := newTestEnv(t, []*v1.Node{draNode("node-0")}, job, []*v1alpha1.PodGroup{gangtest.MakePodGroup("rl", testNS).MinMember(2).Obj()},
		withDRA(), withObjects(nvidiaClass(), gpuSlice("node-0", "H100", "H100", "H100", "H100", "H100", "H100", "H100", "H100"), claim))
	return env, job
}

// claimIs waits until the API's node-gpus satisfies ok.
func (e *testEnv) claimIs(what string, ok func(*resourceapi.ResourceClaim) bool) *resourceapi.ResourceClaim {
	e.t.Helper()
	var c *resourceapi.ResourceClaim
	err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		c, err = e.client.ResourceV1().ResourceClaims(testNS).Get(ctx, "node-gpus", metav1.GetOptions{})
		return err == nil && ok(c), nil
	})
	if err != nil {
		e.t.Fatalf("node-gpus is not %s: allocated %v, annotations %v, finalizers %v",
			what, c != nil && c.Status.Allocation != nil, c.GetAnnotations(), c.GetFinalizers())
	}
	return c
}

// The first member's cycle plans the gang and computes the shared claim's
// allocation but writes nothing: it waits (the plan kept) while the write,
// marked with the gang, lands off the cycle. And a gang whose plan expired
// before any member reserved, and whose members are then all deleted (a
// job suspended), gives back what it wrote: no attempt is in flight for a
// failure to end, and the claim would otherwise stay allocated with no
// consumer.
func TestSharedClaimWrittenOffCycleAndGivenBackWhenTheGangGoes(t *testing.T) {
	env, job := sharedClaimGang(t)
	_, status := env.schedule(job[0])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "status: %v", status)
	require.Contains(t, status.Message(), ErrReasonClaimsWriting)
	written := env.claimIs("allocated and marked", func(c *resourceapi.ResourceClaim) bool {
		_, marked, _ := dra.MarkOf(c)
		return c.Status.Allocation != nil && marked
	})
	m, _, _ := dra.MarkOf(written)
	require.Equal(t, "rl", m.Gang.Name)
	require.True(t, env.pl.claims.Live(m), "the attempt holds its write")
	_, ok := env.ledger().Reservations.Remaining(m.Gang)
	require.True(t, ok, "the plan is kept while the write is in flight")

	env.clock.Step(time.Hour) // the plan expires; no member reserved
	for _, p := range job {
		env.delete(p)
	}
	env.claimIs("given back", func(c *resourceapi.ResourceClaim) bool {
		_, marked, _ := dra.MarkOf(c)
		return c.Status.Allocation == nil && !marked && len(c.Finalizers) == 0
	})
	var events []string
	require.Eventually(t, func() bool {
		events = append(events, env.recorded()...)
		return hasEvent(events, dra.ReasonClaimReleased, "no member of the gang waits")
	}, 10*time.Second, 10*time.Millisecond, "a ClaimReleased Event says why: %q", events)
}

// A write the API server refuses is a lesson: the gang's attempt ends, the
// sharers are kept off the node the plan chose, and what the refused write
// may have marked is given back; a write that times out is retried.
func TestSharedClaimWriteFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		lesson bool
	}{
		{name: "refused", err: apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "node-gpus", errors.New("a webhook says no")), lesson: true},
		{name: "timed out once", err: apierrors.NewServerTimeout(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "update", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, job := sharedClaimGang(t)
			failures := 1
			if tc.lesson {
				failures = 1000
			}
			env.client.PrependReactor("update", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "status" || failures == 0 {
					return false, nil, nil
				}
				failures--
				return true, nil, tc.err
			})
			_, status := env.schedule(job[0])
			require.Contains(t, status.Message(), ErrReasonClaimsWriting)
			key := gang.Key{API: gang.XK8s, Namespace: testNS, Name: "rl"}
			if !tc.lesson {
				env.claimIs("allocated and marked", func(c *resourceapi.ResourceClaim) bool {
					_, marked, _ := dra.MarkOf(c)
					return c.Status.Allocation != nil && marked
				})
				return
			}
			require.Eventually(t, func() bool {
				for _, nodes := range env.ledger().Lessons.View(key).Excluded {
					if nodes.Has("node-0") {
						return true
					}
				}
				return false
			}, 10*time.Second, 10*time.Millisecond, "the sharers are kept off node-0")
			_, inFlight := env.ledger().Reservations.Remaining(key)
			require.False(t, inFlight, "the attempt ended")
			env.claimIs("unmarked and unallocated", func(c *resourceapi.ResourceClaim) bool {
				_, marked, _ := dra.MarkOf(c)
				return c.Status.Allocation == nil && !marked && len(c.Finalizers) == 0
			})
		})
	}
}

// writtenClaim schedules the gang's first member, which plans the gang and
// hands the shared claim's allocation to the writer, and returns the mark
// once the write has landed.
func writtenClaim(t *testing.T, env *testEnv, first *v1.Pod) dra.Mark {
	t.Helper()
	_, status := env.schedule(first)
	require.Contains(t, status.Message(), ErrReasonClaimsWriting)
	written := env.claimIs("allocated and marked", func(c *resourceapi.ResourceClaim) bool {
		_, marked, _ := dra.MarkOf(c)
		return c.Status.Allocation != nil && marked
	})
	m, _, _ := dra.MarkOf(written)
	require.Eventually(t, func() bool {
		c, err := env.pl.devices.Manager().ResourceClaims().Get(testNS, "node-gpus")
		return !env.pl.claims.Busy(m.Gang) && err == nil && c.Status.Allocation != nil
	}, 10*time.Second, 10*time.Millisecond, "the write lands, and the claim tracker has it")
	return m
}

// Permit lets a gang go before DynamicResources' PreBind writes the shared
// claim's reservedFor: until every reserved member has bound, the
// allocation has no consumer the API shows, and the reconciler must count
// it as live, or a gang slow to bind (hundreds of members behind the
// client's rate limit) would lose the claim under members about to bind
// while their siblings run.
func TestSharedClaimLiveWhileTheGangBinds(t *testing.T) {
	env, job := sharedClaimGang(t)
	m := writtenClaim(t, env, job[0])
	live := liveAttempts{env.pl}

	nodes := make([]string, len(job))
	for i, p := range job {
		node, status := env.schedule(p)
		require.Truef(t, status.IsSuccess() || status.IsWait(), "member %s: %v", p.Name, status)
		nodes[i] = node
	}
	_, inFlight := env.ledger().Reservations.Remaining(m.Gang)
	require.False(t, inFlight, "Permit let the gang go: its attempt ended")
	require.True(t, live.Live(m), "reserved members that have not bound keep the claim live")

	env.bind(job[0], nodes[0])
	require.True(t, live.Live(m), "one member still binds")
	env.bind(job[1], nodes[1])
	env.waitForLister(job[1], func(p *v1.Pod) bool { return p.Spec.NodeName != "" })
	require.False(t, live.Live(m), "every member bound: reservedFor names them, the claim controller owns the claim")
}

// A plan that expired before any member reserved ends when the gang is
// next tried: the claims written for it are given back, instead of staying
// held, and live, for a plan that may never be made again (the node they
// pin the members to may be cordoned or full by then).
func TestSharedClaimOfAnExpiredPlanIsGivenBack(t *testing.T) {
	env, job := sharedClaimGang(t)
	m := writtenClaim(t, env, job[0])
	require.True(t, env.pl.claims.Live(m))

	env.clock.Step(time.Hour) // the plan expires; no member reserved
	_, status := env.schedule(job[0])
	require.False(t, status.IsSuccess(), "the member waits while the claim is given back: %v", status)
	env.claimIs("given back", func(c *resourceapi.ResourceClaim) bool {
		_, marked, _ := dra.MarkOf(c)
		return c.Status.Allocation == nil && !marked
	})
	require.False(t, env.pl.claims.Live(m), "the expired attempt's write is no longer live")
	var events []string
	require.Eventually(t, func() bool {
		events = append(events, env.recorded()...)
		return hasEvent(events, dra.ReasonClaimReleased, "its plan expired before its members reserved")
	}, 10*time.Second, 10*time.Millisecond, "a ClaimReleased Event says why: %q", events)
}
