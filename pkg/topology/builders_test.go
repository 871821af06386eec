package topology

import (
	"fmt"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Test fixtures use the scheduling.DefaultPreset's labels and two resources.
const (
	cliqueKey = "nvidia.com/gpu.clique"
	leafKey   = "network.topology.nvidia.com/leaf"
	spineKey  = "network.topology.nvidia.com/spine"
)

var resources = []string{"cpu", "nvidia.com/gpu"}

func nvidiaLevels() []scheduling.Level {
	levels, _ := scheduling.Preset(scheduling.DefaultPreset)
	return levels
}

// nodeWrapper builds a placement.Node: 64 cores and 8 GPUs, all free,
// unless a setter says otherwise.
type nodeWrapper struct{ n placement.Node }

func makeNode(name string) *nodeWrapper {
	return &nodeWrapper{n: placement.Node{
		Name:        name,
		Labels:      map[string]string{},
		Allocatable: placement.Vector{64000, 8},
		Free:        placement.Vector{64000, 8},
	}}
}

func (w *nodeWrapper) label(key, value string) *nodeWrapper {
	w.n.Labels[key] = value
	return w
}

func (w *nodeWrapper) spine(v string) *nodeWrapper  { return w.label(spineKey, v) }
func (w *nodeWrapper) leaf(v string) *nodeWrapper   { return w.label(leafKey, v) }
func (w *nodeWrapper) clique(v string) *nodeWrapper { return w.label(cliqueKey, v) }

// gpus sets both allocatable and free GPUs.
func (w *nodeWrapper) gpus(n int64) *nodeWrapper {
	w.n.Allocatable[1], w.n.Free[1] = n, n
	return w
}

func (w *nodeWrapper) freeGPUs(n int64) *nodeWrapper {
	w.n.Free[1] = n
	return w
}

func (w *nodeWrapper) freeMilliCPU(n int64) *nodeWrapper {
	w.n.Free[0] = n
	return w
}

func (w *nodeWrapper) obj() placement.Node { return w.n }

// memberWrapper builds a placement.Member: a worker asking for one core and
// 8 GPUs unless a setter says otherwise.
type memberWrapper struct{ m placement.Member }

func makeMember(name string) *memberWrapper {
	return &memberWrapper{m: placement.Member{
		Name:        "ns/" + name,
		Request:     placement.Vector{1000, 8},
		Accelerated: true,
	}}
}

func (w *memberWrapper) gpus(n int64) *memberWrapper {
	w.m.Request[1] = n
	w.m.Accelerated = n > 0
	return w
}

func (w *memberWrapper) milliCPU(n int64) *memberWrapper {
	w.m.Request[0] = n
	return w
}

func (w *memberWrapper) eligible(e []bool) *memberWrapper {
	w.m.Eligible = e
	return w
}

func (w *memberWrapper) obj() placement.Member { return w.m }

// requestWrapper builds a placement.Request; members get ranks in the order
// they are added.
type requestWrapper struct{ r placement.Request }

func makeRequest(gang string) *requestWrapper {
	return &requestWrapper{r: placement.Request{Gang: gang, Resources: resources, NodeGeneration: 1}}
}

func (w *requestWrapper) nodes(nodes ...*nodeWrapper) *requestWrapper {
	for _, n := range nodes {
		w.r.Nodes = append(w.r.Nodes, n.obj())
	}
	return w
}

func (w *requestWrapper) nodeObjs(nodes []placement.Node) *requestWrapper {
	w.r.Nodes = append(w.r.Nodes, nodes...)
	return w
}

func (w *requestWrapper) members(members ...*memberWrapper) *requestWrapper {
	for _, m := range members {
		mm := m.obj()
		mm.Rank = len(w.r.Members)
		mm.Request = mm.Request.Clone()
		w.r.Members = append(w.r.Members, mm)
	}
	return w
}

// workers adds n members named w-<rank> asking for gpus GPUs and one core.
func (w *requestWrapper) workers(n int, gpus int64) *requestWrapper {
	for range n {
		w.members(makeMember(fmt.Sprintf("w-%d", len(w.r.Members))).gpus(gpus))
	}
	return w
}

func (w *requestWrapper) policy(level string, required bool) *requestWrapper {
	w.r.Policy = placement.Policy{Level: level, Required: required}
	return w
}

func (w *requestWrapper) generation(g uint64) *requestWrapper {
	w.r.NodeGeneration = g
	return w
}

func (w *requestWrapper) obj() *placement.Request { return &w.r }
