package snapshot

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// Options say how a snapshot becomes an input.
type Options struct {
	// Name names the input in reports.
	Name string
	// Preset and Levels are the topology levels gpu-gang is configured
	// with, tightest first (scheduling.ResolveLevels).
	Preset string
	Levels []scheduling.Level
	// KeepNames keeps node, label and job names as they are; by default
	// they are replaced (see the package comment).
	KeepNames bool
	// Timeout bounds each profile's run.
	Timeout time.Duration
}

// arrivalGap spaces the pending jobs' arrivals at the start of the run, so
// that they reach the schedulers in the order the cluster created them.
const arrivalGap = 10 * time.Millisecond

// Input turns the snapshot into a simulator input: the nodes with their
// topology labels and GPUs, the bound GPU pods as pre-fill, and the pending
// gangs and pods as jobs arriving at the start, in creation order.
func (s *Snapshot) Input(o Options) (*simulator.Input, error) {
	nodes := make([]fabric.NodeInfo, len(s.Nodes))
	for i, n := range s.Nodes {
		nodes[i] = fabric.NodeInfo{Name: n.Name, Labels: n.Labels, GPUs: n.GPUs, DRA: n.DRA, Hardware: n.Hardware}
	}
	layout, err := fabric.FromNodes(o.Preset, o.Levels, nodes)
	if err != nil {
		return nil, err
	}
	names := map[string]string{} // real node name -> simulated
	if o.KeepNames {
		for _, n := range layout.Nodes {
			names[n.Name] = n.Name
		}
	} else {
		if layout, names, err = anonymize(o, layout); err != nil {
			return nil, err
		}
	}
	index := layout.Index()

	in := &simulator.Input{Name: o.Name, Layout: layout, Timeout: o.Timeout}
	used := make([]int, len(layout.Nodes))
	for _, p := range s.Bound {
		n := index[names[p.Node]]
		used[n] += p.GPUs
		if used[n] > layout.Nodes[n].GPUs {
			return nil, fmt.Errorf("node %s: its pods ask for %d %s, more than its %d allocatable; take nodes and pods in one snapshot",
				p.Node, used[n], fabric.GPU, layout.Nodes[n].GPUs)
		}
		in.Prefill = append(in.Prefill, fabric.PrefillPod{Node: n, GPUs: p.GPUs})
	}

	jobNames := newJobNamer(o.KeepNames)
	tiers := map[string]string{}
	for t, name := range []string{scenario.TierClique, scenario.TierLeaf, scenario.TierSpine} {
		if key := layout.TierKeys[t]; key != "" {
			tiers[key] = name
		}
	}
	for _, g := range s.Gangs {
		job := scenario.Job{Name: jobNames.gang(g.Key.Namespace, g.Key.Name), Gang: true, Pods: len(g.Members)}
		for _, m := range g.Members {
			job.GPUsPerPod = max(job.GPUsPerPod, m.GPUs)
			job.Priority = max(job.Priority, m.Priority)
			if m.Claims {
				job.GPURequest = scenario.GPURequestClaim
			}
		}
		topo, err := topologyOf(g, tiers)
		if err != nil {
			return nil, err
		}
		job.Topology = topo
		in.Jobs = append(in.Jobs, job)
	}
	for _, p := range s.Pending {
		job := scenario.Job{Name: jobNames.pod(p.Namespace, p.Name), Pods: 1, GPUsPerPod: p.GPUs, Priority: p.Priority}
		if p.Claims {
			job.GPURequest = scenario.GPURequestClaim
		}
		in.Jobs = append(in.Jobs, job)
	}
	// Gangs and pods in one creation order.
	order := make([]time.Time, 0, len(in.Jobs))
	for _, g := range s.Gangs {
		order = append(order, g.Created)
	}
	for _, p := range s.Pending {
		order = append(order, p.Created)
	}
	sortJobsByCreation(in.Jobs, order)
	for i := range in.Jobs {
		in.Jobs[i].At = time.Duration(i) * arrivalGap
	}

	gpus, bound := layout.TotalGPUs(), 0
	for _, p := range in.Prefill {
		bound += p.GPUs
	}
	in.Description = fmt.Sprintf("Snapshot %s: %d nodes with %d GPUs, %d of them held by %d running pods; %d pending gangs and %d pending pods.",
		s.sourceName(o.KeepNames), len(layout.Nodes), gpus, bound, len(in.Prefill), len(s.Gangs), len(s.Pending))
	if draNodes, draGPUs := layout.DRANodes(); draNodes > 0 {
		in.Description += fmt.Sprintf(" %d of the GPUs on %d nodes that publish them through DRA, replayed as ResourceSlices of as many devices of the same product, compute capability, driver and CUDA version, with NVIDIA's DeviceClass %s and its extended-resource mapping.",
			draGPUs, draNodes, scheduling.DeviceClassGPU)
	}
	if len(s.Notes) > 0 {
		in.Description += " Left out: " + strings.Join(s.Notes, "; ") + "."
	}
	return in, nil
}

func (s *Snapshot) sourceName(keep bool) string {
	if keep && s.Source != "" {
		return s.Source
	}
	return "of a cluster"
}

// topologyOf reads a gang's topology policy as a scenario tier.
func topologyOf(g Gang, tiers map[string]string) (*scenario.Topology, error) {
	p := g.Policy
	if p.Level == "" {
		return nil, nil
	}
	tier, ok := tiers[p.Level]
	if !ok {
		known := make([]string, 0, len(tiers))
		for k := range tiers {
			known = append(known, k)
		}
		slices.Sort(known)
		kind := "preferred"
		if p.Required {
			kind = "required"
		}
		return nil, fmt.Errorf("PodGroup %s: its %s topology level %s is not one the simulator places by; it knows %s",
			g.Key, kind, p.Level, strings.Join(known, ", "))
	}
	return &scenario.Topology{Level: tier, Required: p.Required}, nil
}

func sortJobsByCreation(jobs []scenario.Job, created []time.Time) {
	idx := make([]int, len(jobs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return created[a].Compare(created[b]) })
	sorted := make([]scenario.Job, len(jobs))
	for i, k := range idx {
		sorted[i] = jobs[k]
	}
	copy(jobs, sorted)
}

// anonymize renames the nodes after their place in the fabric, replaces
// the topology label values the same way, and drops every other label. It
// returns the new layout and the map from real to new node names.
func anonymize(o Options, l *fabric.Layout) (*fabric.Layout, map[string]string, error) {
	names := map[string]string{}
	spineOf := map[int]int{} // layout spine index -> order of first appearance
	leafInSpine := map[int]int{}
	leafIndex := map[int]int{}
	cliqueInLeaf := map[int]int{}
	cliqueIndex := map[int]int{}
	nodeInLeaf := map[int]int{}
	width := func(n int) int { return len(fmt.Sprint(max(n-1, 0))) }
	extra := &extraValues{values: map[[2]string]string{}, count: map[string]int{}}
	var nodes []fabric.NodeInfo
	maxLeaf := 0
	for _, leaf := range l.Leaves {
		maxLeaf = max(maxLeaf, len(leaf))
	}
	for _, n := range l.Nodes {
		s, ok := spineOf[n.Domain[fabric.Spine]]
		if !ok {
			s = len(spineOf)
			spineOf[n.Domain[fabric.Spine]] = s
		}
		lf, ok := leafIndex[n.Domain[fabric.Leaf]]
		if !ok {
			lf = leafInSpine[s]
			leafInSpine[s]++
			leafIndex[n.Domain[fabric.Leaf]] = lf
		}
		k := nodeInLeaf[n.Domain[fabric.Leaf]]
		nodeInLeaf[n.Domain[fabric.Leaf]]++
		leafName := fmt.Sprintf("s%d-l%d", s, lf)
		name := fmt.Sprintf("%s-n%0*d", leafName, width(maxLeaf), k)
		labels := map[string]string{scheduling.HostnameKey: name}
		values := [3]string{"", leafName, fmt.Sprintf("s%d", s)}
		if c := n.Domain[fabric.Clique]; c >= 0 {
			ci, ok := cliqueIndex[c]
			if !ok {
				ci = cliqueInLeaf[n.Domain[fabric.Leaf]]
				cliqueInLeaf[n.Domain[fabric.Leaf]]++
				cliqueIndex[c] = ci
			}
			values[fabric.Clique] = fmt.Sprintf("%s-c%d", leafName, ci)
		}
		for t, key := range l.TierKeys {
			if key == "" {
				continue
			}
			switch {
			case n.Labels[key] == "":
				// Unlabelled stays unlabelled: the schedulers treat it so.
			default:
				labels[key] = values[t]
			}
		}
		// Levels beyond the three tiers: one value per real value, in
		// order of appearance.
		for _, lv := range o.Levels[min(len(o.Levels), len(l.TierKeys)):] {
			if v := n.Labels[lv.Key]; v != "" {
				labels[lv.Key] = extra.value(lv.Key, v)
			}
		}
		names[n.Name] = name
		nodes = append(nodes, fabric.NodeInfo{Name: name, Labels: labels, GPUs: n.GPUs, DRA: n.DRA, Hardware: n.Hardware})
	}
	out, err := fabric.FromNodes(o.Preset, o.Levels, nodes)
	return out, names, err
}

// extraValues gives each real value of a level beyond the three tiers a
// made-up one, numbered per level in order of appearance.
type extraValues struct {
	values map[[2]string]string // {key, real value} -> made-up value
	count  map[string]int
}

func (e *extraValues) value(key, real string) string {
	k := [2]string{key, real}
	if v, ok := e.values[k]; ok {
		return v
	}
	v := fmt.Sprintf("v%d", e.count[key])
	e.count[key]++
	e.values[k] = v
	return v
}

// jobNamer names jobs: by order when anonymizing, else after the real
// namespace and name, cut to fit a label value with room for a member
// suffix, and made unique.
type jobNamer struct {
	keep        bool
	gangs, pods int
	used        map[string]bool
}

func newJobNamer(keep bool) *jobNamer { return &jobNamer{keep: keep, used: map[string]bool{}} }

func (j *jobNamer) gang(ns, name string) string {
	j.gangs++
	if !j.keep {
		return fmt.Sprintf("gang-%03d", j.gangs-1)
	}
	return j.unique(ns + "." + name)
}

func (j *jobNamer) pod(ns, name string) string {
	j.pods++
	if !j.keep {
		return fmt.Sprintf("pod-%03d", j.pods-1)
	}
	return j.unique(ns + "." + name)
}

var nameInvalid = regexp.MustCompile(`[^a-z0-9.-]+`)

// maxJobName leaves room in a 63-character label value and pod name for
// "-<member index>".
const maxJobName = 56

func (j *jobNamer) unique(name string) string {
	name = strings.Trim(nameInvalid.ReplaceAllString(strings.ToLower(name), "-"), "-.")
	if len(name) > maxJobName {
		name = strings.TrimRight(name[:maxJobName], "-.")
	}
	base := name
	for i := 1; j.used[name]; i++ {
		suffix := fmt.Sprintf("-%d", i)
		name = strings.TrimRight(base[:min(len(base), maxJobName-len(suffix))], "-.") + suffix
	}
	j.used[name] = true
	return name
}
