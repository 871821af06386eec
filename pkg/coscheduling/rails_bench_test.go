package coscheduling

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// BenchmarkRailAlignedPass measures the gang plugin's planning pass, the
// PreFilter of a gang's first member, for a gang of 8 members that each
// claim 4 of a node's 8 GPUs, on 5,000 DRA nodes that also publish 8 RDMA
// NICs, GPU k and NIC k on one PCIe root (railFabric). Half the nodes run a
// claim of 4 GPUs: on one node of each pair the GPUs' names follow their
// rails, on the other they run backwards, so the busy halves sit on rails
// 0-3 and 4-7 alike. Nodes are labelled as BenchmarkCapacityPreCheckDRA's
// and planned with the topology planner.
//
// The two runs differ only in the PodGroup's rail-alignment annotation:
// none, then preferred. Both plan the same gang on the same cluster,
// through the same profile (NodeResourcesFit and DynamicResources before
// the gang plugin). The preferred pass also does what alignment costs: it
// reads each node's free rails, plans on rail sets, and allocates its
// members' claims on the chosen rails, handing the writes to the
// allocations table. Those writes run off the cycle, as in the scheduler,
// where the API server does their work; here the fake API server does it
// in this process, on the same two cores, at a cost of its own (a REST
// mapper built per write): the writes wait at its door until the pass is
// done (railBench.writes) and are not measured.
//
// Each pass is metered on its thread, as BenchmarkCapacityPreCheckDRA
// meters a cycle: cycle-cpu-ns/op is the thread's CPU and the pass's
// share of the collector's, stock-cpu-ns/op the stock plugins' PreFilter
// within it, own-cpu-ns/op the rest, gpu-gang's. Preferred reports
// x-unaligned, its cycle CPU over none's: thread CPU, unlike ns/op, does
// not count the other work of a shared machine. (gpu-gang's own part of
// an unaligned pass is well under a millisecond, the plan being read from
// kept state, so a ratio of own parts would mostly measure noise.)
//
// Each iteration is a fresh attempt. Between iterations, untimed, the
// attempt is ended with the steps a deleted PodGroup takes (the
// allocations table gives back what it wrote, the ledger and the planner
// forget the gang), and the benchmark waits until the claims read as they
// did before and reads the allocated devices again: what a write changed
// is paid once by whichever pass comes next, in the scheduler as here, and
// is no part of planning this gang. Both runs go through the same steps.
func BenchmarkRailAlignedPass(b *testing.B) {
	const nodes, size = 5000, 8
	// unaligned is the unaligned run's cycle CPU per pass.
	var unaligned float64
	for _, mode := range []string{scheduling.RailAlignmentNone, scheduling.RailAlignmentPreferred} {
		b.Run(fmt.Sprintf("nodes=%d/gang=%d/align=%s", nodes, size, mode), func(b *testing.B) {
			r := newRailBench(b, nodes, size, mode)
			// The first pass reads the slices' devices once for every
			// pass after it, as the scheduler's first cycle would; it is
			// checked for what the run is meant to measure.
			r.pass()
			r.checkFirst()
			r.freshAttempt()
			// The stock plugins and the cycle run on this goroutine; the
			// meters read its thread's CPU, which the neighbours of a
			// shared machine leave alone, as wall time they do not.
			goruntime.LockOSThread()
			defer goruntime.UnlockOSThread()
			goruntime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			r.stock.reset()
			r.cycle.reset()
			for b.Loop() {
				r.writes.Lock()
				r.cycle.metered(r.ctx, r.pass)
				b.StopTimer()
				r.writes.Unlock()
				r.freshAttempt()
				b.StartTimer()
			}
			b.StopTimer()
			cycle := r.cycle.report(b)
			own := cycle - r.stock.report(b)
			b.ReportMetric(own, "own-cpu-ns/op")
			switch {
			case mode == scheduling.RailAlignmentNone:
				unaligned = cycle
			case unaligned > 0:
				b.ReportMetric(cycle/unaligned, "x-unaligned")
			}
		})
	}
}

// railBench is one run of BenchmarkRailAlignedPass.
type railBench struct {
	b    *testing.B
	env  *testEnv
	ctx  context.Context
	key  gang.Key
	job  []*v1.Pod
	mode string
	// layouts are railFabric's, by node index.
	layouts [][]int
	// probes counts syncClaimWatch's probe claims.
	probes int
	// stock meters the stock plugins' PreFilter, cycle the whole pass,
	// each on the benchmark's thread.
	stock, cycle *threadMeter
	// writes, held, keeps the fake API server's ResourceClaim calls
	// waiting, the writes of the claims the pass allocated among them.
	writes *sync.RWMutex
}

// newRailBench builds the cluster: nodes DRA nodes of railFabric, labelled
// in NVLink cliques of 8 nodes, leaves of 32 and spines of 256; every node
// i with i%4 < 2 runs a pod whose claim holds gpu-0..3, which is rails 0-3
// on even nodes (GPU names follow rails) and rails 4-7 on odd ones (they
// run backwards); and gang rl of size half-node members, annotated mode.
func newRailBench(b *testing.B, nodes, size int, mode string) *railBench {
	straight := []int{0, 1, 2, 3, 4, 5, 6, 7}
	reversed := []int{7, 6, 5, 4, 3, 2, 1, 0}
	layouts := make([][]int, nodes)
	for i := range layouts {
		layouts[i] = straight
		if i%2 == 1 {
			layouts[i] = reversed
		}
	}
	fabric, objs := railFabric(layouts...)
	var pods []*v1.Pod
	for i, n := range fabric {
		n.Labels = map[string]string{
			cliqueLabel: fmt.Sprint("c", i/8), leafLabel: fmt.Sprint("l", i/32), spineLabel: fmt.Sprint("s", i/256),
		}
		if i%4 >= 2 {
			continue
		}
		claim := allocatedClaim("other", fmt.Sprintf("busy-%04d", i), n.Name, gpuNames(0, 4)...)
		ref := claim.Status.ReservedFor[0]
		pod := st.MakePod().Namespace("other").Name(ref.Name).UID(string(ref.UID)).Node(n.Name).Obj()
		pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(claim.Name)}}
		pods = append(pods, pod)
		objs = append(objs, claim)
	}
	job, objs := halfNodeGang(size, objs)
	pg := gangtest.MakePodGroup("rl", testNS).MinMember(int32(size)).Annotation(scheduling.AnnotationRailAlignment, mode).Obj()
	stock := &threadMeter{tb: b, perIter: meteredPlugins, metric: "stock-cpu-ns/op"}
	env := newTestEnv(b, fabric, append(pods, job...), []*v1alpha1.PodGroup{pg},
		withTopology(b), withDRA(), withObjects(objs...), withStockMeter(stock))
	writes := &sync.RWMutex{}
	// The env stamps each claim write with a newer resourceVersion, as the
	// API server does, so that the DRA manager's claim tracker sees it;
	// here the write first waits at the door.
	env.client.PrependReactor("*", "resourceclaims", func(clienttesting.Action) (bool, runtime.Object, error) {
		writes.RLock()
		defer writes.RUnlock()
		return false, nil, nil // on to the env's versioning store
	})
	return &railBench{
		b: b, env: env, job: job, mode: mode, layouts: layouts, writes: writes,
		stock: stock, cycle: &threadMeter{tb: b, perIter: 1, metric: "cycle-cpu-ns/op"},
		key: gang.Key{Namespace: testNS, Name: "rl"},
		// The scheduler's own logger, at its verbosity, as the other
		// benchmarks have it: the test logger logs every V(5) line.
		ctx: klog.NewContext(env.ctx, klog.Background()),
	}
}

// pass runs PreFilter of the gang's first member: the planning pass. A
// gang that is not aligned is planned and its first member let through; an
// aligned one waits for the writes of its members' claims.
func (r *railBench) pass() {
	_, status, _ := r.env.fh.RunPreFilterPlugins(r.ctx, framework.NewCycleState(), r.job[0])
	aligned := r.mode != scheduling.RailAlignmentNone
	switch {
	case !aligned && !status.IsSuccess():
		r.b.Fatalf("the unaligned gang was not planned: %v", status)
	case aligned && (status.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(status.Message(), dra.ErrReasonClaimsWriting)):
		r.b.Fatalf("the aligned gang's pass did not write its members' claims: %v", status)
	}
}

// checkFirst checks, after the first pass, that the runs measure what
// they say: the aligned gang's pass wrote every member's claim, one
// member per node, each on the same 4 rails; the unaligned gang's wrote
// none.
func (r *railBench) checkFirst() {
	r.b.Helper()
	pl := r.env.pl
	if r.mode == scheduling.RailAlignmentNone {
		if written := pl.claims.Claims(r.key); len(written) > 0 {
			r.b.Fatalf("the unaligned gang's pass wrote claims %v", written)
		}
		return
	}
	r.awaitWrites()
	lister := r.env.Informers.Resource().V1().ResourceClaims().Lister().ResourceClaims(testNS)
	var sets []string
	on := map[string]bool{}
	for _, p := range r.job {
		c, _ := lister.Get(p.Name + "-gpus")
		node, rails := claimRails(r.b, c, indexedLayout(r.b, r.layouts))
		sets = append(sets, fmt.Sprint(rails))
		on[node] = true
	}
	if len(on) != len(r.job) || len(slices.Compact(slices.Clone(sets))) != 1 || strings.Count(sets[0], " ") != 3 {
		r.b.Fatalf("the aligned gang's members are not one per node on the same 4 rails: nodes %d, rails %v", len(on), sets)
	}
}

// awaitWrites returns once the aligned gang's pass has written every
// member's claim and the informer and the DRA manager's claim tracker,
// which the members' cycles read, both show it allocated.
func (r *railBench) awaitWrites() {
	r.b.Helper()
	pl := r.env.pl
	tracker := pl.devices.Manager().ResourceClaims()
	lister := r.env.Informers.Resource().V1().ResourceClaims().Lister().ResourceClaims(testNS)
	written := func(context.Context) (bool, error) {
		for _, p := range r.job {
			name := p.Name + "-gpus"
			if c, err := lister.Get(name); err != nil || c.Status.Allocation == nil {
				return false, nil
			}
			if c, err := tracker.Get(testNS, name); err != nil || c.Status.Allocation == nil {
				return false, nil
			}
		}
		return !pl.claims.Busy(r.key), nil
	}
	if err := wait.PollUntilContextTimeout(r.ctx, time.Millisecond, wait.ForeverTestTimeout, true, written); err != nil {
		r.b.Fatalf("the aligned gang's writes never landed, or the claim tracker never saw them: %v", err)
	}
}

// freshAttempt ends the attempt the pass began and waits until the next
// pass finds the cluster as the first did: the gang's claims unallocated,
// unmarked and known so to the DRA manager's tracker and to the informer,
// no plan held, and the device source's read of allocated devices current.
func (r *railBench) freshAttempt() {
	pl := r.env.pl
	pl.claims.Abandon(r.key, "the benchmark plans the gang afresh")
	pl.ledger.ForgetGang(r.key)
	pl.core.ForgetGang(r.key)
	tracker := pl.devices.Manager().ResourceClaims()
	lister := r.env.Informers.Resource().V1().ResourceClaims().Lister()
	settled := func(context.Context) (bool, error) {
		// Releases record Events; a full recorder would block them.
		r.env.recorded()
		if len(pl.claims.Claims(r.key)) > 0 {
			return false, nil
		}
		for _, p := range r.job {
			name := p.Name + "-gpus"
			c, err := tracker.Get(testNS, name)
			if err != nil || c.Status.Allocation != nil || tracker.GetPendingAllocation(c.UID) != nil {
				return false, nil
			}
			if _, marked, _ := dra.MarkOf(c); marked {
				return false, nil
			}
			listed, err := lister.ResourceClaims(testNS).Get(name)
			if err != nil || listed.ResourceVersion != c.ResourceVersion {
				return false, nil
			}
		}
		return true, nil
	}
	if err := wait.PollUntilContextTimeout(r.ctx, 100*time.Microsecond, wait.ForeverTestTimeout, true, settled); err != nil {
		r.b.Fatalf("the gang's claims were not given back: %v (table holds %v)", err, pl.claims.Claims(r.key))
	}
	r.syncClaimWatch()
	if _, err := pl.devices.Pass(r.ctx); err != nil {
		r.b.Fatal(err)
	}
}

// syncClaimWatch returns once the device source's claim watch and the DRA
// manager's claim tracker, each fed by its own handler on the claim
// informer, have seen every claim event so far: both see a probe claim
// come, then go. Only then does a read of the allocated devices stand for
// the next pass (capacity.NewDevicesFromTracker). The probe names no
// member, device or node; the watch tells it by its owner, as a claim
// kube-scheduler made for a pod's extended resources.
func (r *railBench) syncClaimWatch() {
	r.probes++
	name := fmt.Sprint("probe-", r.probes)
	owner := capacity.PodRef{Namespace: probeNS, UID: types.UID(name)}
	claims := r.env.client.ResourceV1().ResourceClaims(probeNS)
	watch := r.env.pl.devices.Inventories().Claims()
	tracker := r.env.pl.devices.Manager().ResourceClaims()
	seen := func(present bool) {
		r.b.Helper()
		if err := wait.PollUntilContextTimeout(r.ctx, 50*time.Microsecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			_, err := tracker.Get(probeNS, name)
			return watch.HasExtendedResourceClaim(owner) == present && (err == nil) == present, nil
		}); err != nil {
			r.b.Fatalf("the claim watch or tracker never saw probe claim %s (present: %v): %v", name, present, err)
		}
	}
	probe := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: probeNS, Name: name, UID: types.UID(name),
		Annotations:     map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name, UID: owner.UID, Controller: ptr.To(true)}},
	}}
	if _, err := claims.Create(r.ctx, probe, metav1.CreateOptions{}); err != nil {
		r.b.Fatal(err)
	}
	seen(true)
	if err := claims.Delete(r.ctx, name, metav1.DeleteOptions{}); err != nil {
		r.b.Fatal(err)
	}
	seen(false)
}

// probeNS holds railBench's probe claims.
const probeNS = "probe-claims"
