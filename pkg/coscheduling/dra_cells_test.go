package coscheduling

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/core"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// TestNodeViewReadsChangedDevices checks the view's device cells against a
// fresh read of every node, plan after plan, while devices are allocated
// and released in flight on random nodes (the NodeInfos do not move), other
// gangs hold devices, and the pass's columns change between a claim's
// kind, the mapped nvidia.com/gpu and plain resources alone.
func TestNodeViewReadsChangedDevices(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 18))
	const n = 24
	var nodes []*v1.Node
	objects := []runtime.Object{nvidiaClass()}
	for i := range n {
		name := fmt.Sprintf("node-%02d", i)
		nodes = append(nodes, draNode(name))
		objects = append(objects, gpuSlice(name, "H100", "H100", "H100", "H100", "H100", "H100", "H100", "H100"))
	}
	tmpl := claimTemplate(testNS, "gpus", gpuClaimSpec(scheduling.DeviceClassGPU, 2, ""))
	claimer := member("job", "job-0", "")
	// pending are unallocated claims of other pods, allocated in flight
	// below as DynamicResources' Reserve does.
	var pending []*resourceapi.ResourceClaim
	for i := range 12 {
		c := claimFromTemplate(member("other", fmt.Sprint("other-", i), ""), "gpus", tmpl)
		pending = append(pending, c)
		objects = append(objects, c)
	}
	objects = append(objects, tmpl, claimFromTemplate(claimer, "gpus", tmpl))
	env := newTestEnv(t, nodes, nil, nil, withDRA(), withObjects(objects...))
	list, err := env.snapshot.NodeInfos().List()
	require.NoError(t, err)
	tracker := env.pl.devices.Manager().ResourceClaims()

	// check plans members' pass once, and compares the view with a fresh
	// read.
	check := func(round int, members []*v1.Pod) []fwk.NodeInfo {
		sorted := env.pl.core.Snapshot().Live(list, env.pl.core.NodeGeneration(), env.pl.core.LiveNodes)
		d, status := env.pl.core.DemandOf(env.ctx, nil, members, 0)
		require.Nil(t, status)
		dims := core.Dimensions(d.Requests)
		cols := d.Columns(dims)
		held := map[string]capacity.Amounts{}
		for range r.IntN(3) {
			h := capacity.Amounts{}
			for _, dim := range dims {
				h[dim] = int64(1 + r.IntN(3))
			}
			held[sorted[r.IntN(len(sorted))].Node().Name] = h
		}
		want := readFresh(env.ctx, sorted, cols, held)
		// Lent, as a plan has it; the lease ends with the check.
		got, _, _, release := env.pl.core.Snapshot().Nodes(env.ctx, sorted, dims, cols, held, true)
		require.Empty(t, cmp.Diff(want, got, ignoreLabelsVersions), "round %d, dims %v (-fresh,+view)", round, dims)
		release()
		return sorted
	}
	mapped := member("job", "job-1", "4")
	members := [][]*v1.Pod{{claimer}, {mapped}, {member("job", "job-2", "")}}
	inFlight := map[int]bool{}
	for round := range 30 {
		sorted := check(round, members[(round/6)%3])

		// A claim is allocated in flight on a random node, or released.
		i := r.IntN(len(pending))
		c := pending[i]
		if inFlight[i] {
			require.True(t, tracker.MaybeRemoveClaimPendingAllocation(c.UID, true))
			inFlight[i] = false
			continue
		}
		node := sorted[r.IntN(len(sorted))].Node().Name
		first := r.IntN(7)
		allocated := allocatedClaim(c.Namespace, c.Name, node,
			fmt.Sprint(scheduling.DeviceNameGPUPrefix, first), fmt.Sprint(scheduling.DeviceNameGPUPrefix, first+1))
		allocated.UID = c.UID
		require.NoError(t, tracker.SignalClaimPendingAllocation(c.UID, allocated))
		inFlight[i] = true
	}

	// Without its DeviceClass nvidia.com/gpu is the nodes' allocatable
	// again: the same dimensions, read from another source.
	check(30, []*v1.Pod{mapped})
	require.NoError(t, env.client.ResourceV1().DeviceClasses().Delete(env.ctx, scheduling.DeviceClassGPU, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return env.pl.devices.Manager().DeviceClassResolver().GetDeviceClass(gpu) == nil },
		classGoneTimeout, classGoneTimeout/100, "the DRA manager forgets the deleted DeviceClass")
	check(31, []*v1.Pod{mapped})
}

// readFresh reads every node as the view would, without it: what the
// view's vectors must equal.
func readFresh(ctx context.Context, sorted []fwk.NodeInfo, cols []dra.Column, held map[string]capacity.Amounts) []placement.Node {
	var out []placement.Node
	for _, ni := range sorted {
		a, f := make(placement.Vector, len(cols)), make(placement.Vector, len(cols))
		for c := range cols {
			a[c] = cols[c].Allocatable(ctx, ni)
			f[c] = cols[c].Free(ctx, ni, held[ni.Node().Name])
		}
		out = append(out, placement.Node{Name: ni.Node().Name, Labels: ni.Node().Labels, Allocatable: a, Free: f})
	}
	return out
}

// classGoneTimeout bounds how long the DRA manager takes to see a deleted
// DeviceClass.
const classGoneTimeout = 10 * time.Second
