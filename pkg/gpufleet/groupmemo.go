package gpufleet

import (
	"sync"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// groupings keeps, per grouping policy, the last grouping NodeGroups made,
// node by node, so that the next plan pays a pointer comparison per node
// rather than a cache lookup, a key and a map insert (rebuilt for every
// attempt, the groups cost more than the plan on a 20,000-node cluster). A
// node's key is read again only when its labels version moved or is
// unknown (placement.Node.LabelsVersion), the devices are another set, or
// the node at that position is another one; the groups are rebuilt only
// when some key did change. Nodes of the labels epoch the memo was last
// checked at (placement.Request.LabelsEpoch) are not read at all. Safe for
// concurrent use.
type groupings struct {
	mu sync.Mutex
	// byPolicy holds one memo per grouping policy (fleet.Requirements'
	// GroupPolicy); a cluster's gangs ask for a handful.
	byPolicy map[fleet.Requirements]*groupingMemo
}

// maxPolicies bounds byPolicy: a memo per policy costs a key per node.
const maxPolicies = 8

// groupingMemo is one policy's last grouping. Its slices are indexed like
// the nodes it was made for.
type groupingMemo struct {
	mu sync.Mutex
	// devices is the matcher the keys were read with (nil: labels only).
	devices  *capacity.Matcher
	names    []string
	versions []uint64 // each node's labels version (placement.Node.LabelsVersion)
	keys     []fleet.GroupKey
	// epoch is the labels epoch of the nodes names, versions and keys
	// were last checked against; zero when unknown.
	epoch uint64
	// groups is what NodeGroups returned for keys, nil when trivial. Its
	// slices are shared with every caller, which only read them.
	groups *placement.Groups
}

func newGroupings() *groupings {
	return &groupings{byPolicy: map[fleet.Requirements]*groupingMemo{}}
}

// memo returns the policy's memo, making it (and dropping every other when
// there are too many) on first use.
func (g *groupings) memo(policy fleet.Requirements) *groupingMemo {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.byPolicy[policy]
	if !ok {
		if len(g.byPolicy) >= maxPolicies {
			clear(g.byPolicy)
		}
		m = &groupingMemo{}
		g.byPolicy[policy] = m
	}
	return m
}

// groups returns s's groups of nodes (see NodeGroups), from the memo where
// the nodes did not change.
func (g *groupings) groups(s *cycleState, nodes []placement.Node, epoch uint64) *placement.Groups {
	m := g.memo(s.req.GroupPolicy())
	m.mu.Lock()
	defer m.mu.Unlock()
	if epoch != 0 && m.epoch == epoch && m.devices == s.devices && len(m.keys) == len(nodes) {
		return shallow(m.groups)
	}
	m.epoch = epoch
	if m.devices != s.devices || len(m.keys) != len(nodes) {
		m.devices = s.devices
		m.names = make([]string, len(nodes))
		m.versions = make([]uint64, len(nodes))
		m.keys = make([]fleet.GroupKey, len(nodes))
		for i := range nodes {
			m.names[i], m.versions[i] = nodes[i].Name, nodes[i].LabelsVersion
			m.keys[i] = s.nodes.groupKey(nodes[i].Name, nodes[i].Labels, s.nodeDevices(nodes[i].Name), s.req)
		}
		m.groups = groupsOf(s.req, m.keys)
		return shallow(m.groups)
	}
	changed := false
	for i := range nodes {
		n := &nodes[i]
		if n.SameLabels(m.names[i], m.versions[i]) {
			continue
		}
		k := s.nodes.groupKey(n.Name, n.Labels, s.nodeDevices(n.Name), s.req)
		m.names[i], m.versions[i] = n.Name, n.LabelsVersion
		if k != m.keys[i] {
			m.keys[i] = k
			changed = true
		}
	}
	if changed {
		m.groups = groupsOf(s.req, m.keys)
	}
	return shallow(m.groups)
}

// groupsOf groups nodes by their keys; nil when they form one group.
func groupsOf(r fleet.Requirements, keys []fleet.GroupKey) *placement.Groups {
	g := fleet.NewGrouping(keys)
	if g.Trivial() {
		return nil
	}
	fromDevices := false
	for _, k := range keys {
		fromDevices = fromDevices || k.FromDevices()
	}
	out := &placement.Groups{Of: g.Of, Names: make([]string, len(g.Groups)), Rule: groupRule(r, fromDevices), Relax: relaxGroups(r)}
	for k := range g.Groups {
		out.Names[k] = g.Groups[k].Key.String()
	}
	return out
}

// shallow returns a copy of g that shares its slices: a caller may replace
// its fields without touching the memo.
func shallow(g *placement.Groups) *placement.Groups {
	if g == nil {
		return nil
	}
	c := *g
	return &c
}
