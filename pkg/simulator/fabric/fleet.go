package fabric

import (
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// Random streams of the fleet's draws, one per attribute, so that adding
// one attribute to a scenario leaves the others' draws alone. They sit
// apart from the workload's (1000+, 2000+) and the pre-fill's (3).
const (
	streamProducts = 101 + iota
	streamDrivers
	streamSharing
	streamCapacity
	streamUpgrading
	streamDRANodes
)

// sharedProductSuffix is what the device plugin appends to
// nvidia.com/gpu.product on nodes that share their GPUs.
const sharedProductSuffix = "-SHARED"

// labelFleet gives every node the labels f draws for it, as GPU feature
// discovery, the GPU Operator and provisioners would, and multiplies the
// GPU capacity of nodes that share their GPUs by the replicas.
func (l *Layout) labelFleet(f *scenario.Fleet) {
	var seed uint64
	if f.Seed != nil { // scenario.SetDefaults sets it; a bare Fabric may not
		seed = uint64(*f.Seed)
	}
	for i := range l.Nodes {
		l.Nodes[i].Labels[scheduling.LabelGPUPresent] = "true"
		l.Nodes[i].Labels["nvidia.com/gpu.count"] = strconv.Itoa(l.Spec.GPUsPerNode)
	}
	shared := make([]bool, len(l.Nodes))
	if m := f.Sharing; m != nil {
		for i, c := range l.draw(m.Per, m.Weights(), seed, streamSharing) {
			s := m.Choices[c]
			n := &l.Nodes[i]
			n.Labels[scheduling.LabelGPUSharingStrategy] = s.Strategy
			if s.Strategy != scheduling.SharingStrategyNone {
				shared[i] = true
				n.Labels[scheduling.LabelGPUReplicas] = strconv.Itoa(s.Replicas)
				n.GPUs = l.Spec.GPUsPerNode * s.Replicas
			}
		}
	}
	if m := f.Products; m != nil {
		for i, c := range l.draw(m.Per, m.Weights(), seed, streamProducts) {
			p := m.Choices[c]
			l.Nodes[i].Hardware.Product, l.Nodes[i].Hardware.Compute = p.Name, p.Compute
			labels := l.Nodes[i].Labels
			labels[scheduling.LabelGPUProduct] = p.Name
			if shared[i] {
				labels[scheduling.LabelGPUProduct] = p.Name + sharedProductSuffix
			}
			major, minor, _ := strings.Cut(p.Compute, ".")
			labels[scheduling.LabelGPUComputeMajor] = major
			labels[scheduling.LabelGPUComputeMinor] = minor
		}
	}
	if m := f.Drivers; m != nil {
		for i, c := range l.draw(m.Per, m.Weights(), seed, streamDrivers) {
			d := m.Choices[c]
			l.Nodes[i].Hardware.Driver, l.Nodes[i].Hardware.CUDA = d.Version, d.CUDA
			labelDriver(l.Nodes[i].Labels, d)
		}
	}
	if m := f.Capacity; m != nil {
		for i, c := range l.draw(m.Per, m.Weights(), seed, streamCapacity) {
			ch := m.Choices[c]
			if v, ok := fleet.CapacityLabelValue(ch.Label, fleet.CapacityType(ch.Type)); ok {
				l.Nodes[i].Labels[ch.Label] = v
			}
		}
	}
	if f.Upgrading > 0 {
		rng := rand.New(rand.NewPCG(seed, streamUpgrading))
		upgrading := int(f.Upgrading*float64(len(l.Nodes)) + 0.5)
		for _, n := range l.Nodes {
			n.Labels[scheduling.LabelGPUDriverUpgradeState] = scheduling.UpgradeStateDone
		}
		for _, i := range rng.Perm(len(l.Nodes))[:upgrading] {
			l.Nodes[i].Labels[scheduling.LabelGPUDriverUpgradeState] = "upgrade-required"
		}
	}
}

// labelDriver writes the driver and CUDA version labels of d's label set.
// Components keep their spelling ("05" stays "05"), as GFD writes them.
func labelDriver(labels map[string]string, d scenario.Driver) {
	drv := strings.Split(d.Version, ".")
	cuda := strings.Split(d.CUDA, ".")
	set := func(key string, parts []string, i int) {
		if i < len(parts) {
			labels[key] = parts[i]
		}
	}
	if d.Labels == scenario.DriverLabelsBoth || d.Labels == scenario.DriverLabelsCurrent {
		labels[scheduling.LabelCUDADriverVersionFull] = d.Version
		set(scheduling.LabelCUDADriverVersionMajor, drv, 0)
		set(scheduling.LabelCUDADriverVersionMinor, drv, 1)
		set(scheduling.LabelCUDADriverVersionRevision, drv, 2)
		labels[scheduling.LabelCUDARuntimeVersionFull] = d.CUDA
		set(scheduling.LabelCUDARuntimeVersionMajor, cuda, 0)
		set(scheduling.LabelCUDARuntimeVersionMinor, cuda, 1)
	}
	if d.Labels == scenario.DriverLabelsBoth || d.Labels == scenario.DriverLabelsDeprecated {
		set(scheduling.LabelCUDADriverMajor, drv, 0)
		set(scheduling.LabelCUDADriverMinor, drv, 1)
		set(scheduling.LabelCUDADriverRev, drv, 2)
		set(scheduling.LabelCUDARuntimeMajor, cuda, 0)
		set(scheduling.LabelCUDARuntimeMinor, cuda, 1)
	}
}

// draw picks a choice, by weight, for every unit of the fabric (per node,
// clique, leaf or spine) in fabric order, and returns each node's choice.
func (l *Layout) draw(per string, weights []int, seed uint64, stream uint64) []int {
	rng := rand.New(rand.NewPCG(seed, stream))
	unitOf, units := l.units(per)
	total := 0
	for _, w := range weights {
		total += w
	}
	choice := make([]int, units)
	for u := range choice {
		r := rng.IntN(total)
		for c, w := range weights {
			if r < w {
				choice[u] = c
				break
			}
			r -= w
		}
	}
	out := make([]int, len(l.Nodes))
	for i := range l.Nodes {
		out[i] = choice[unitOf(i)]
	}
	return out
}

// units returns how many units of a Per kind (node, clique, leaf or
// spine) the fabric has, and the unit of each node index.
func (l *Layout) units(per string) (unitOf func(node int) int, units int) {
	switch per {
	case scenario.PerClique:
		return func(i int) int { return l.Nodes[i].Domain[Clique] }, len(l.Cliques)
	case scenario.PerLeaf:
		return func(i int) int { return l.Nodes[i].Domain[Leaf] }, len(l.Leaves)
	case scenario.PerSpine:
		return func(i int) int { return l.Nodes[i].Domain[Spine] }, l.Spec.Spines
	}
	return func(i int) int { return i }, len(l.Nodes)
}
