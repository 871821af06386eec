package preemption

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// The random cases TestDecideMatchesExhaustiveSearch draws, and how a
// failing one is printed.

// caseSize bounds a random case: the exhaustive search tries 2^items sets.
type caseSize struct {
	maxNodes, maxUnits, maxItems int
}

// smallCases keeps the exhaustive test at about a second.
var smallCases = caseSize{maxNodes: 9, maxUnits: 8, maxItems: 13}

// randomCase draws a small cluster with a few running units and a
// preemptor of at most 5 members.
func randomCase(rng *rand.Rand) *Request { return randomCaseOf(rng, smallCases) }

func randomCaseOf(rng *rand.Rand, size caseSize) *Request {
	for {
		if req := tryRandomCase(rng, size); req != nil {
			return req
		}
	}
}

func tryRandomCase(rng *rand.Rand, size caseSize) *Request {
	var nodes []placement.Node
	for len(nodes) == 0 || len(nodes) > size.maxNodes {
		nodes = nodes[:0]
		for s := range 1 + rng.IntN(2) {
			for l := range 1 + rng.IntN(2) {
				for c := range 1 + rng.IntN(2) {
					for range 1 + rng.IntN(size.maxNodes/4) {
						cpu := []int64{16000, 64000}[rng.IntN(2)]
						nodes = append(nodes, placement.Node{
							Name: fmt.Sprintf("n%d", len(nodes)),
							// Label values repeat under different parents, so
							// only structured domain keys tell them apart.
							Labels: map[string]string{
								spineKey:  fmt.Sprintf("s%d", s),
								leafKey:   fmt.Sprintf("l%d", l),
								cliqueKey: fmt.Sprintf("c%d", c),
							},
							Allocatable: placement.Vector{cpu, 8},
							Free:        placement.Vector{cpu, 8},
						})
					}
				}
			}
		}
	}
	rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	c := newCluster(nodes)
	for range rng.IntN(3) {
		c.pdb(fmt.Sprintf("ns/pdb-%d", len(c.pdbs)), rng.IntN(3))
	}
	priorities := []int32{-5, 0, 1, 1, 5, 10}
	ages := []time.Duration{0, time.Minute, time.Minute, 5 * time.Minute, time.Hour}
	// avail tracks free capacity as pods are drawn; c.add takes them from
	// the nodes for real.
	avail := make([]placement.Vector, len(c.nodes))
	for i := range avail {
		avail[i] = c.nodes[i].Free.Clone()
	}
	items := 0
	for u := range 3 + rng.IntN(size.maxUnits-2) {
		var w *unitWrapper
		size := 1
		if rng.IntN(10) < 7 {
			w = makeGang(fmt.Sprintf("ns/g%d", u))
			size = 1 + rng.IntN(4)
		} else {
			w = makePod(fmt.Sprintf("ns/p%d", u))
		}
		w.priority(priorities[rng.IntN(len(priorities))])
		if age := ages[rng.IntN(len(ages))]; age == 0 {
			w.u.Started = time.Time{}
		} else {
			w.startedAgo(age)
		}
		if rng.IntN(3) == 0 {
			w.movable()
		}
		for range size {
			gpus := []int64{2, 4, 8, 8}[rng.IntN(4)]
			cpu := []int64{1000, 2000}[rng.IntN(2)]
			node := ""
			if rng.IntN(12) > 0 {
				n := rng.IntN(len(nodes))
				if !(placement.Vector{cpu, gpus}).FitsIn(avail[n]) {
					continue
				}
				node = c.nodes[n].Name
				avail[n].Sub(placement.Vector{cpu, gpus})
			}
			ps := podSpec{node: node, request: placement.Vector{cpu, gpus}}
			if len(c.pdbs) > 0 && rng.IntN(3) == 0 {
				ps.pdbs = []int{rng.IntN(len(c.pdbs))}
			}
			w.pods = append(w.pods, ps)
		}
		if len(w.pods) == 0 {
			continue
		}
		items++
		if w.u.Kind == KindGang && len(w.pods) > 1 && rng.IntN(3) == 0 {
			w.surplus(1 + rng.IntN(len(w.pods)-1))
			if rng.IntN(3) == 0 {
				w.keepLast()
			}
			items += len(w.pods)
		}
		c.add(w)
	}
	if items > size.maxItems {
		return nil
	}
	// Unit order must not matter; names, not indices, break ties.
	rng.Shuffle(len(c.units), func(i, j int) { c.units[i], c.units[j] = c.units[j], c.units[i] })

	p := makePreemptor("ns/preemptor").priority(10)
	shapes := 1 + rng.IntN(2)
	total := 1 + rng.IntN(5)
	var req [2]placement.Vector
	for s := range shapes {
		req[s] = placement.Vector{[]int64{1000, 6000}[rng.IntN(2)], []int64{2, 4, 8}[rng.IntN(3)]}
	}
	if shapes == 2 && slices.Equal(req[0], req[1]) {
		req[1][1] = 3
	}
	// Members that exclude each other (anti-affinity) cap a shape per node.
	var perNode [2]int
	for s := range shapes {
		perNode[s] = []int{0, 0, 0, 1, 2}[rng.IntN(5)]
	}
	for i := range total {
		r := req[i%shapes]
		p.r.Members = append(p.r.Members, placement.Member{
			Name: fmt.Sprintf("ns/w-%d", i), Rank: i, Request: r.Clone(), Accelerated: true, MaxPerNode: perNode[i%shapes],
		})
	}
	if rng.IntN(6) == 0 {
		// Replacements for members of a running gang, placed near them.
		for range 1 + rng.IntN(3) {
			p.r.Anchors = append(p.r.Anchors, rng.IntN(len(nodes)))
		}
	}
	switch rng.IntN(8) {
	case 0:
		p.launcher(100)
	case 1:
		// A preemptor without accelerators at all: a plain CPU pod or two.
		p.r.Members = nil
		for range 1 + rng.IntN(2) {
			p.launcher([]int64{4000, 12000}[rng.IntN(2)])
		}
	}
	levels := []string{scheduling.HostnameKey, cliqueKey, leafKey, spineKey}
	if rng.IntN(3) > 0 {
		p.policy(levels[rng.IntN(4)], rng.IntN(2) == 0)
	}
	if rng.IntN(20) == 0 {
		p.never()
	}
	return p.on(c)
}

// describeCase prints a case for a failure message.
func describeCase(req *Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "preemptor priority %d policy %+v %s anchors %v\n", req.Priority, req.Policy, req.PreemptionPolicy, req.Anchors)
	for _, m := range req.Members {
		fmt.Fprintf(&b, "  member %s %v accelerated=%v maxPerNode=%d\n", m.Name, m.Request, m.Accelerated, m.MaxPerNode)
	}
	for _, n := range req.Nodes {
		fmt.Fprintf(&b, "  node %s %s/%s/%s free %v\n", n.Name, n.Labels[spineKey], n.Labels[leafKey], n.Labels[cliqueKey], n.Free)
	}
	for _, u := range req.Units {
		fmt.Fprintf(&b, "  %s %s prio %d started %v surplus %d movable %v\n", u.Kind, u.Name, u.Priority, u.Started.Sub(now), u.Surplus, u.Movable)
		for _, pd := range u.Pods {
			node := "-"
			if pd.Node >= 0 {
				node = req.Nodes[pd.Node].Name
			}
			fmt.Fprintf(&b, "    pod %s on %s %v pdbs %v keep %v\n", pd.Name, node, pd.Request, pd.PDBs, pd.Keep)
		}
	}
	for _, p := range req.PDBs {
		fmt.Fprintf(&b, "  pdb %s allowed %d\n", p.Name, p.Allowed)
	}
	return b.String()
}
