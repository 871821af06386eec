package preemption

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// Fixtures use the default preset's labels and two resources: cpu in
// millicores and GPUs.
const (
	cliqueKey = scheduling.LabelGPUClique
	leafKey   = scheduling.LabelLeaf
	spineKey  = scheduling.LabelSpine
)

var resources = []string{"cpu", "nvidia.com/gpu"}

// now is the tests' reference time.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func nvidiaLevels() []scheduling.Level {
	levels, _ := scheduling.Preset(scheduling.DefaultPreset)
	return levels
}

func newTestEngine(t testing.TB) *Engine {
	t.Helper()
	p, err := topology.NewPlanner(nvidiaLevels())
	require.NoError(t, err)
	return NewEngine(p, p)
}

// cluster is nodes with running units; adding a unit takes its pods'
// requests from the nodes' free capacity.
type cluster struct {
	nodes []placement.Node
	index map[string]int
	units []Unit
	pdbs  []PDB
}

func newCluster(nodes []placement.Node) *cluster {
	c := &cluster{nodes: nodes, index: map[string]int{}}
	for i := range nodes {
		c.index[nodes[i].Name] = i
		c.nodes[i].Free = c.nodes[i].Free.Clone()
	}
	return c
}

// pdb adds a budget and returns its index.
func (c *cluster) pdb(name string, allowed int) int {
	c.pdbs = append(c.pdbs, PDB{Name: name, Allowed: allowed})
	return len(c.pdbs) - 1
}

func (c *cluster) add(units ...*unitWrapper) *cluster {
	for _, w := range units {
		u := w.u
		u.Pods = nil
		for i, pw := range w.pods {
			node := -1
			if pw.node != "" {
				n, ok := c.index[pw.node]
				if !ok {
					panic("unknown node " + pw.node)
				}
				node = n
				c.nodes[n].Free.Sub(pw.request)
			}
			u.Pods = append(u.Pods, Pod{
				Name:    fmt.Sprintf("%s-%d", u.Name, i),
				Node:    node,
				Request: pw.request.Clone(),
				GPUs:    pw.request[1],
				PDBs:    pw.pdbs,
				Keep:    pw.keep,
			})
		}
		c.units = append(c.units, u)
	}
	return c
}

// unitWrapper builds a Unit: a gang of priority 0 started an hour ago,
// unless a setter says otherwise.
type unitWrapper struct {
	u    Unit
	pods []podSpec
}

type podSpec struct {
	node    string
	request placement.Vector
	pdbs    []int
	keep    bool
}

func makeGang(name string) *unitWrapper {
	return &unitWrapper{u: Unit{Name: name, Kind: KindGang, Started: now.Add(-time.Hour)}}
}

func makePod(name string) *unitWrapper {
	w := makeGang(name)
	w.u.Kind = KindPod
	return w
}

func (w *unitWrapper) priority(p int32) *unitWrapper { w.u.Priority = p; return w }
func (w *unitWrapper) surplus(n int) *unitWrapper    { w.u.Surplus = n; return w }

// movable marks the unit as one that checkpoints and restarts cheaply.
func (w *unitWrapper) movable() *unitWrapper { w.u.Movable = true; return w }

// notStarted makes the unit one that has not started: it loses no work.
func (w *unitWrapper) notStarted() *unitWrapper { w.u.Started = time.Time{}; return w }

func (w *unitWrapper) startedAgo(d time.Duration) *unitWrapper {
	w.u.Started = now.Add(-d)
	return w
}

// on adds one pod per node asking for gpus GPUs and one core.
func (w *unitWrapper) on(gpus int64, nodes ...string) *unitWrapper {
	for _, n := range nodes {
		w.pods = append(w.pods, podSpec{node: n, request: placement.Vector{1000, gpus}})
	}
	return w
}

// cpuOn adds one pod per node asking for milliCPU and no GPUs.
func (w *unitWrapper) cpuOn(milliCPU int64, nodes ...string) *unitWrapper {
	for _, n := range nodes {
		w.pods = append(w.pods, podSpec{node: n, request: placement.Vector{milliCPU, 0}})
	}
	return w
}

// underPDB puts every pod added so far under budget b.
func (w *unitWrapper) underPDB(b int) *unitWrapper {
	for i := range w.pods {
		w.pods[i].pdbs = append(w.pods[i].pdbs, b)
	}
	return w
}

// keepLast marks the last pod added as one that never goes alone.
func (w *unitWrapper) keepLast() *unitWrapper {
	w.pods[len(w.pods)-1].keep = true
	return w
}

// preemptorWrapper builds a Request on a cluster: members named w-<rank>,
// priority 100.
type preemptorWrapper struct {
	r       Request
	anchors []string
}

func makePreemptor(gang string) *preemptorWrapper {
	return &preemptorWrapper{r: Request{
		Request:  placement.Request{Gang: gang, Resources: resources, NodeGeneration: 1},
		Priority: 100,
		Now:      now,
	}}
}

func (w *preemptorWrapper) priority(p int32) *preemptorWrapper { w.r.Priority = p; return w }

func (w *preemptorWrapper) never() *preemptorWrapper {
	w.r.PreemptionPolicy = v1.PreemptNever
	return w
}

func (w *preemptorWrapper) policy(level string, required bool) *preemptorWrapper {
	w.r.Policy = placement.Policy{Level: level, Required: required}
	return w
}

// workers adds n members asking for gpus GPUs and one core each.
func (w *preemptorWrapper) workers(n int, gpus int64) *preemptorWrapper {
	for range n {
		w.r.Members = append(w.r.Members, placement.Member{
			Name:        fmt.Sprintf("ns/w-%d", len(w.r.Members)),
			Rank:        len(w.r.Members),
			Request:     placement.Vector{1000, gpus},
			Accelerated: gpus > 0,
		})
	}
	return w
}

// maxPerNode caps members per node, as anti-affinity among them would.
func (w *preemptorWrapper) maxPerNode(n int) *preemptorWrapper {
	for i := range w.r.Members {
		w.r.Members[i].MaxPerNode = n
	}
	return w
}

// anchoredAt makes the members replacements for a gang running on nodes.
func (w *preemptorWrapper) anchoredAt(nodes ...string) *preemptorWrapper {
	w.anchors = append(w.anchors, nodes...)
	return w
}

// launcher adds a member without accelerators asking for milliCPU.
func (w *preemptorWrapper) launcher(milliCPU int64) *preemptorWrapper {
	w.r.Members = append(w.r.Members, placement.Member{
		Name:    "ns/launcher",
		Rank:    len(w.r.Members),
		Request: placement.Vector{milliCPU, 0},
	})
	return w
}

// on builds the request against c's nodes and units.
func (w *preemptorWrapper) on(c *cluster) *Request {
	r := w.r
	r.Nodes = c.nodes
	r.Units = c.units
	r.PDBs = c.pdbs
	for _, n := range w.anchors {
		r.Anchors = append(r.Anchors, c.index[n])
	}
	return &r
}
