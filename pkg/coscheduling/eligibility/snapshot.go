package eligibility

import (
	"context"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Snapshot is the planning snapshot: what plans read of the nodes, kept
// from one plan to the next and read again only where it changed. It holds
// the live nodes in name order; per node its allocatable and free vectors
// (allocatable resources and DRA devices) in the plan's resource
// dimensions, and its labels version (placement.Node.LabelsVersion, from
// which the planners' domain trees and GPUFleet's group keys are kept);
// and which nodes can take a member at all (Roomy). A plan then pays per
// node a generation compare, not a lookup per resource. Holds and
// nominations are overlays: they are subtracted per plan, on the held
// nodes alone.
//
// The one invalidation story: a node is read again when its scheduler-cache
// generation (NodeInfo.GetGeneration) moved, when its devices read
// differently (cells.go), or when the plan's holds on it differ; and only
// then. The order is rebuilt when the scheduler's node list is not the one
// it was built from (kube-scheduler rebuilds that list only when nodes come
// or go, and updates its NodeInfos in place), or when the node informer
// saw a node come, go or change labels (the generation passed to Live). A node's vectors are read
// again when its NodeInfo is another one or its generation moved: the
// scheduler's cache bumps it on every change to the node or its pods.
// Dimensions served by devices (DRA) depend on claims and slices as well:
// the view keeps the device source it read them from, and a node's
// vectors are read again also when its devices read differently now
// (deviceCells, dra_cells.go).
type Snapshot struct {
	mu sync.Mutex
	// input is the snapshot list sorted was made from, gen the plugin's
	// nodeGeneration then; sorted is the live nodes in name order. given
	// is the caller's list input was copied from (see Live).
	input  []fwk.NodeInfo
	given  []fwk.NodeInfo
	gen    uint64
	sorted []fwk.NodeInfo
	// dims are the dimensions vecs hold; vecs[i] is sorted[i]'s, and
	// base[i] the node as the planner reads it, with vecs[i] and no holds.
	dims []v1.ResourceName
	vecs []nodeVectors
	base []placement.Node
	// vecGen[i] is vecs[i].gen, or unread while vecs[i] was never read:
	// the generations in one dense array, which a plan compares with the
	// ones it found before it loads any node's vectors.
	vecGen []int64
	// lent is base with the holds of the plan it was last lent to (see
	// nodes); patched lists the nodes whose Free that plan's holds
	// replaced, and stale says a node's vectors were read again while it
	// was lent. lentGen are the nodes' generations as that plan found them
	// (the kept verdicts compare them rather than load every NodeInfo
	// again). leased is set while a plan holds lent and lentGen: no one
	// writes them. gens are where a pass that lends nothing reads the
	// generations.
	lent    []placement.Node
	lentGen []int64
	gens    []int64
	patched []int
	stale   bool
	leased  bool
	// labels[i] is how sorted[i]'s labels were last read, kept across
	// vectors read in other dimensions (and, by name, across new sorted
	// lists), so that a node's labels version moves only when its labels
	// do.
	labels []labelsRead
	// epoch is the labels epoch of base and lent
	// (placement.Request.LabelsEpoch): a new one whenever sorted is
	// rebuilt or some node's labels version moves, zero until Nodes has
	// read them.
	epoch uint64
	// cells are the device columns vecs were read with.
	cells deviceCells
	// room keeps which nodes can take a member (Roomy).
	room roomyMemo
}

// nodeVectors are one node's vectors, as read from ni at generation gen.
// They are shared with the requests built from them: whoever changes a
// request's vector clones it first, as the planners do.
type nodeVectors struct {
	ni          fwk.NodeInfo
	gen         int64
	alloc, free placement.Vector
}

// labelsRead is one node's labels as last read: at NodeInfo generation gen,
// with the version (placement.Node.LabelsVersion) they were given.
type labelsRead struct {
	name    string
	gen     int64
	labels  map[string]string
	version uint64
}

// labelsVersions hands out labels versions, never the same twice in a
// process (zero is "unknown").
var labelsVersions atomic.Uint64

// labelsOf returns the labels version of node n, read at generation gen
// in position i: the one last given while the node's generation or labels
// did not move, a new one otherwise (moved). Locked.
func (v *Snapshot) labelsOf(i int, n *v1.Node, gen int64) (version uint64, moved bool) {
	r := &v.labels[i]
	if r.version != 0 && r.name == n.Name && (r.gen == gen || maps.Equal(r.labels, n.Labels)) {
		r.gen, r.labels = gen, n.Labels
		return r.version, false
	}
	*r = labelsRead{name: n.Name, gen: gen, labels: n.Labels, version: labelsVersions.Add(1)}
	return r.version, true
}

// Live returns the scheduler's nodes in name order, less those the node
// informer no longer has (liveNodes sorts and filters them), from the
// snapshot while nodeInfos is the list it was built from and the node
// informer's generation is still gen.
//
// kube-scheduler's snapshot makes a new node list whenever nodes come or
// go, and never writes one it handed out (the cache's
// updateNodeInfoSnapshotList): the very list given last time holds the
// same nodes, which is one comparison, not one per node. Another list is
// compared node by node.
func (v *Snapshot) Live(nodeInfos []fwk.NodeInfo, gen uint64, liveNodes func([]fwk.NodeInfo) []fwk.NodeInfo) []fwk.NodeInfo {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.sorted != nil && gen == v.gen && (sameList(nodeInfos, v.given) || slices.Equal(nodeInfos, v.input)) {
		v.given = nodeInfos
		return v.sorted
	}
	v.input, v.given, v.gen = slices.Clone(nodeInfos), nodeInfos, gen
	v.sorted = liveNodes(nodeInfos)
	// Nodes that stay keep their labels versions.
	byName := make(map[string]labelsRead, len(v.labels))
	for _, r := range v.labels {
		byName[r.name] = r
	}
	v.labels = make([]labelsRead, len(v.sorted))
	for i, ni := range v.sorted {
		v.labels[i] = byName[ni.Node().Name]
	}
	v.dims, v.vecs, v.base, v.cells, v.epoch = nil, nil, nil, deviceCells{}, 0
	v.lent, v.lentGen, v.gens, v.patched, v.stale = nil, nil, nil, nil, false
	return v.sorted
}

// Nodes returns nodeInfos (the sorted live nodes) as the planner reads
// them, with allocatable and free vectors in dims, the free ones less held.
// cols are the dimensions' columns; with nodes other than the view's it
// reads every node afresh. Otherwise the nodes are the view's, read again
// where the NodeInfo or the node's devices changed, with held subtracted
// on the held nodes alone.
//
// The slice it returns is the caller's alone until it calls release, and
// must not be written. When the view's own slice is free, it is lent
// (lease): the nodes the last plan patched are put back and this plan's
// held nodes patched, so a plan pays per node a generation compare and
// nothing else. While the slice is lent, or when lend is false (a caller
// that keeps the nodes past its plan), the caller gets a copy.
//
// gens, when not nil, are the generations of nodeInfos this pass found
// (gens[i] is nodeInfos[i].GetGeneration() now), lent with the nodes: a
// caller that checks kept state per node reads them in one array rather
// than loading every NodeInfo again. Only lent nodes come with them.
//
// epoch is the nodes' labels epoch (placement.Request.LabelsEpoch), zero
// for nodes other than the view's.
func (v *Snapshot) Nodes(ctx context.Context, nodeInfos []fwk.NodeInfo, dims []v1.ResourceName, cols []dra.Column,
	held map[string]capacity.Amounts, lend bool) (out []placement.Node, gens []int64, epoch uint64, release func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	cached := len(nodeInfos) > 0 && len(nodeInfos) == len(v.sorted) && &nodeInfos[0] == &v.sorted[0]
	if !cached {
		out = make([]placement.Node, len(nodeInfos))
		for i, ni := range nodeInfos {
			n := ni.Node()
			out[i] = placement.Node{Name: n.Name, Labels: n.Labels, Allocatable: make(placement.Vector, len(cols)), Free: make(placement.Vector, len(cols))}
			for c := range cols {
				out[i].Allocatable[c] = cols[c].Allocatable(ctx, ni)
				out[i].Free[c] = cols[c].Free(ctx, ni, held[n.Name])
			}
		}
		return out, nil, 0, func() {}
	}
	cells, same := v.cells.next(cols)
	if v.vecs == nil || !slices.Equal(dims, v.dims) || !same {
		v.dims, v.vecs, v.base = slices.Clone(dims), make([]nodeVectors, len(nodeInfos)), make([]placement.Node, len(nodeInfos))
		v.vecGen = make([]int64, len(nodeInfos))
		for i := range v.vecGen {
			v.vecGen[i] = unread
		}
		v.lent, v.lentGen, v.patched = nil, nil, nil
	}
	if lend && !v.leased && v.lent == nil {
		v.lent, v.lentGen, v.stale = make([]placement.Node, len(nodeInfos)), make([]int64, len(nodeInfos)), true
	}
	lease := lend && !v.leased
	if lease {
		for _, i := range v.patched {
			v.lent[i] = v.base[i]
		}
		v.patched = v.patched[:0]
	}
	v.cells = cells
	// Most passes find no device moved: a node's name (another object to
	// load) is read only when some did.
	everywhere := cells.unchangedEverywhere()
	seen := v.lentGen
	if !lease {
		if len(v.gens) != len(nodeInfos) {
			v.gens = make([]int64, len(nodeInfos))
		}
		seen = v.gens
	}
	readGenerations(nodeInfos, seen)
	labelsMoved := false
	for i, ni := range nodeInfos {
		if everywhere && v.vecGen[i] == seen[i] {
			// vecs[i] was read at this generation, from ni itself: vecs
			// are read from the view's sorted nodes and dropped with them.
			continue
		}
		nv := &v.vecs[i]
		if nv.ni == ni && nv.gen == seen[i] && (everywhere || cells.unchangedOn(ni.Node().Name)) {
			continue
		}
		*nv = nodeVectors{ni: ni, gen: seen[i], alloc: make(placement.Vector, len(cols)), free: make(placement.Vector, len(cols))}
		v.vecGen[i] = seen[i]
		for c := range cols {
			nv.alloc[c] = cols[c].Allocatable(ctx, ni)
			nv.free[c] = cols[c].Free(ctx, ni, nil)
		}
		n := ni.Node()
		version, moved := v.labelsOf(i, n, seen[i])
		labelsMoved = labelsMoved || moved
		v.base[i] = placement.Node{Name: n.Name, Labels: n.Labels, Allocatable: nv.alloc, Free: nv.free, LabelsVersion: version}
		if lease {
			v.lent[i] = v.base[i]
		} else {
			// lent keeps its old vectors; the next lease puts every node back.
			v.stale = true
		}
	}
	if labelsMoved || v.epoch == 0 {
		v.epoch = labelsVersions.Add(1)
	}
	if lease {
		if v.stale {
			copy(v.lent, v.base)
			v.stale = false
		}
		out, gens, v.leased = v.lent, v.lentGen, true
		release = func() {
			v.mu.Lock()
			v.leased = false
			v.mu.Unlock()
		}
	} else {
		out, release = slices.Clone(v.base), func() {}
	}
	// Each held node is patched on its own: the order of held's keys
	// decides nothing.
	for name, h := range held {
		i, found := slices.BinarySearchFunc(out, name, func(n placement.Node, name string) int { return strings.Compare(n.Name, name) })
		if !found || len(h) == 0 {
			continue
		}
		f := v.base[i].Free.Clone()
		for c := range cols {
			if cols[c].MayUseDevices {
				// Held devices count where their kinds overlap.
				f[c] = cols[c].Free(ctx, nodeInfos[i], h)
				continue
			}
			f[c] -= h[cols[c].Name]
		}
		out[i].Free = f
		if lease {
			v.patched = append(v.patched, i)
		}
	}
	return out, gens, v.epoch, release
}

// sameList reports whether a and b are one list: the same elements of the
// same array.
func sameList(a, b []fwk.NodeInfo) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// unread marks a node whose vectors the snapshot has not read (vecGen): no
// NodeInfo's generation is that low.
const unread = math.MinInt64

// readGenerations reads each NodeInfo's generation into gens, in a loop of
// its own: the NodeInfos lie apart in memory, and loads that nothing else
// waits on are in flight together, where a loop that also compares and
// branches on each one waits for them one by one. It is most of what an
// unchanged node costs a plan.
func readGenerations(nodeInfos []fwk.NodeInfo, gens []int64) {
	for i, ni := range nodeInfos {
		if fi, ok := ni.(*framework.NodeInfo); ok {
			gens[i] = fi.Generation
			continue
		}
		gens[i] = ni.GetGeneration()
	}
}
