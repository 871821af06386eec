package topology

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Tree groups a node set into domains at every level of a hierarchy. Level 0
// holds one domain per node, levels 1..n the label levels tightest first, and
// the last level one domain for the whole cluster. Domains are numbered per
// level in depth-first order, so the nodes of any domain, and its descendants
// at any lower level, are contiguous ranges.
//
// A Tree depends only on node names and labels. It is built once per node-set
// generation, never written afterwards, and shared by concurrent Plan calls;
// free capacity lives in a usage, one per call.
type Tree struct {
	// levels has one entry per tree level: the node level, the label
	// levels tightest first, then the cluster level.
	levels []scheduling.Level
	// generation, names and values identify the node set the tree was
	// built from: values[j][i] is node i's label of label level j+1.
	// versions[i] is node i's placement.Node.LabelsVersion: a node that
	// brings the same name and non-zero version brings the same values,
	// and matches reads its values only otherwise.
	generation uint64
	names      []string
	values     [][]string
	versions   []uint64
	// dom[l] are the domains of level l in depth-first order.
	dom [][]domain
	// anc[l][p] is the index in dom[l] of the domain holding the node at
	// depth-first position p.
	anc [][]int32
	// node maps depth-first positions to indices in the Request's Nodes;
	// pos is its inverse.
	node []int32
	pos  []int32
}

// domain is one node of the tree. Its identity is structural: its parent,
// plus the label that holds it together (see segment); names joined into
// strings are only ever built for people.
type domain struct {
	// first and end bound its children in the level below (level > 0).
	first, end int32
	// lo and hi bound its nodes' depth-first positions.
	lo, hi int32
	seg    segment
	// ambiguous is set when another domain of the same level shows the
	// same value, so names for people must include the parent's.
	ambiguous bool
}

// segment is what sets a domain apart from its siblings. A labelled domain
// is identified by its own label value (anchor is its own level). Nodes that
// lack the label are grouped only with nodes sharing the nearest tighter
// label, anchor being that label's level and value its value; with no tighter
// label the anchor is level 0 and the value the node's name, so an unlabelled
// node is alone. Unlabelled nodes thus never merge with unlabelled strangers,
// and an NVLink clique stays whole even where the leaf label above it is
// missing.
type segment struct {
	parent int32
	anchor int32
	value  string
}

// BuildTree groups nodes into domains. It only reads names and labels, so
// the tree stays valid for as long as the node-set generation does. A label
// with an empty value counts as missing.
func BuildTree(levels []scheduling.Level, nodes []placement.Node, generation uint64) (*Tree, error) {
	if err := scheduling.ValidateLevels(levels); err != nil {
		return nil, err
	}
	return buildTree(levels, nodes, generation), nil
}

func buildTree(labelLevels []scheduling.Level, nodes []placement.Node, generation uint64) *Tree {
	nl := len(labelLevels)
	top := nl + 1
	t := &Tree{
		levels:     make([]scheduling.Level, 0, top+1),
		generation: generation,
		names:      make([]string, len(nodes)),
		values:     make([][]string, nl),
		versions:   make([]uint64, len(nodes)),
		dom:        make([][]domain, top+1),
		anc:        make([][]int32, top+1),
		node:       make([]int32, len(nodes)),
		pos:        make([]int32, len(nodes)),
	}
	t.levels = append(t.levels, scheduling.Level{Key: scheduling.HostnameKey, Name: "node"})
	t.levels = append(t.levels, labelLevels...)
	t.levels = append(t.levels, scheduling.Level{Name: "cluster"})

	// Pass 1: find every node's domain at every level, top down. segs[l]
	// lists level l's domains in order of discovery.
	segs := make([][]segment, top+1)
	segs[top] = []segment{{parent: -1, anchor: int32(top)}}
	segs[0] = make([]segment, len(nodes))
	for l := 1; l <= nl; l++ {
		segs[l] = make([]segment, 0, 64)
		t.values[l-1] = make([]string, len(nodes))
	}
	index := make([]map[segment]int32, top)
	for l := 1; l <= nl; l++ {
		index[l] = make(map[segment]int32)
	}
	for i := range nodes {
		t.names[i] = nodes[i].Name
		t.versions[i] = nodes[i].LabelsVersion
		parent := int32(0)
		for l := nl; l >= 1; l-- {
			t.values[l-1][i] = nodes[i].Labels[t.levels[l].Key]
			seg := segment{parent: parent, anchor: int32(l), value: t.values[l-1][i]}
			if seg.value == "" {
				seg.anchor, seg.value = t.anchorBelow(l, &nodes[i])
			}
			id, ok := index[l][seg]
			if !ok {
				id = int32(len(segs[l]))
				segs[l] = append(segs[l], seg)
				index[l][seg] = id
			}
			parent = id
		}
		segs[0][i] = segment{parent: parent, value: nodes[i].Name}
	}

	// Pass 2: order each level by its parents' order, then labelled before
	// unlabelled, then by value as people read it. Discovery order follows
	// the Request's node order, which must not leak into decisions.
	rank := make([][]int32, top+1) // rank[l][discovery id] = depth-first index
	rank[top] = []int32{0}
	for l := top - 1; l >= 0; l-- {
		ids := make([]int32, len(segs[l]))
		for i := range ids {
			ids[i] = int32(i)
		}
		s, up := segs[l], rank[l+1]
		slices.SortFunc(ids, func(a, b int32) int {
			sa, sb := &s[a], &s[b]
			if c := cmp.Compare(up[sa.parent], up[sb.parent]); c != 0 {
				return c
			}
			if c := cmp.Compare(sb.anchor, sa.anchor); c != 0 {
				return c
			}
			if c := compareNatural(sa.value, sb.value); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		rank[l] = make([]int32, len(ids))
		t.dom[l] = make([]domain, len(ids))
		for k, id := range ids {
			rank[l][id] = int32(k)
			seg := s[id]
			seg.parent = up[seg.parent]
			t.dom[l][k] = domain{first: -1, seg: seg}
		}
	}
	t.dom[top] = []domain{{first: -1, seg: segment{parent: -1, anchor: int32(top)}}}

	// Pass 3: node positions, child ranges, node ranges, ancestors.
	for i := range nodes {
		p := rank[0][i]
		t.node[p], t.pos[i] = int32(i), p
	}
	for p := range t.dom[0] {
		t.dom[0][p].lo, t.dom[0][p].hi = int32(p), int32(p)+1
	}
	for l := 1; l <= top; l++ {
		for k := range t.dom[l-1] {
			parent := &t.dom[l][t.dom[l-1][k].seg.parent]
			if parent.first < 0 {
				parent.first = int32(k)
			}
			parent.end = int32(k) + 1
		}
		for k := range t.dom[l] {
			d := &t.dom[l][k]
			if d.first < 0 { // only the root of an empty cluster
				d.first, d.end = 0, 0
				continue
			}
			d.lo, d.hi = t.dom[l-1][d.first].lo, t.dom[l-1][d.end-1].hi
		}
	}
	for l := 0; l <= top; l++ {
		t.anc[l] = make([]int32, len(nodes))
		for k, d := range t.dom[l] {
			for p := d.lo; p < d.hi; p++ {
				t.anc[l][p] = int32(k)
			}
		}
	}
	for l := 1; l <= nl; l++ {
		seen := make(map[segment]int, len(t.dom[l]))
		for _, d := range t.dom[l] {
			seen[segment{anchor: d.seg.anchor, value: d.seg.value}]++
		}
		for k := range t.dom[l] {
			d := &t.dom[l][k]
			d.ambiguous = seen[segment{anchor: d.seg.anchor, value: d.seg.value}] > 1
		}
	}
	return t
}

// anchorBelow finds what holds an unlabelled node together at level l: the
// nearest tighter label it has, or else its own name.
func (t *Tree) anchorBelow(l int, n *placement.Node) (int32, string) {
	for j := l - 1; j >= 1; j-- {
		if v := n.Labels[t.levels[j].Key]; v != "" {
			return int32(j), v
		}
	}
	return 0, n.Name
}

// Levels returns the label levels, tightest first, without the implicit node
// and cluster levels.
func (t *Tree) Levels() []scheduling.Level { return slices.Clone(t.levels[1 : len(t.levels)-1]) }

// NumDomains returns how many domains the level with the given label key
// has; scheduling.HostnameKey counts nodes. Unknown keys have none.
func (t *Tree) NumDomains(key string) int {
	l, err := t.levelOf(key)
	if err != nil {
		return 0
	}
	return len(t.dom[l])
}

// top is the index of the cluster level.
func (t *Tree) top() int { return len(t.levels) - 1 }

// matches reports whether nodes are, index by index, the nodes the tree was
// built from, with the same labels at every level. It guards the cache
// against a caller that reorders or filters nodes without changing the
// generation, and against nodes read from a snapshot that had not yet seen
// the relabel that changed it.
func (t *Tree) matches(nodes []placement.Node) bool {
	if len(nodes) != len(t.names) {
		return false
	}
	for i := range nodes {
		if nodes[i].SameLabels(t.names[i], t.versions[i]) {
			continue
		}
		if nodes[i].Name != t.names[i] {
			return false
		}
		for j, vals := range t.values {
			if nodes[i].Labels[t.levels[j+1].Key] != vals[i] {
				return false
			}
		}
	}
	return true
}

// levelOf maps a policy's label key to a tree level. The tree numbers its
// levels as scheduling.LevelRank ranks them (node level 0, label levels
// tightest first), so it asks LevelRank, error included.
func (t *Tree) levelOf(key string) (int, error) {
	return scheduling.LevelRank(t.levels[1:t.top()], key)
}

// path describes domain d of level l by the domains holding it, loosest
// first. The cluster's path is empty.
func (t *Tree) path(l int, d int32) []PathElem {
	if l >= t.top() {
		return nil
	}
	out := make([]PathElem, t.top()-l)
	for k := l; k < t.top(); k++ {
		seg := t.dom[k][d].seg
		out[t.top()-1-k] = PathElem{Key: t.levels[k].Key, Value: seg.value, Unlabelled: k > 0 && seg.anchor != int32(k)}
		d = seg.parent
	}
	return out
}

// name names domain d of level l for people, adding the parent's name only
// where the value alone is ambiguous.
func (t *Tree) name(l int, d int32) string {
	if l >= t.top() {
		return "the cluster"
	}
	dm := &t.dom[l][d]
	var s string
	switch {
	case l == 0 || int(dm.seg.anchor) == l:
		s = dm.seg.value
	case dm.seg.anchor == 0:
		s = fmt.Sprintf("(no %s label: node %s)", t.levels[l].Name, dm.seg.value)
	default:
		s = fmt.Sprintf("(no %s label: %s %s)", t.levels[l].Name, t.levels[dm.seg.anchor].Name, dm.seg.value)
	}
	if dm.ambiguous && l+1 < t.top() {
		s = t.name(l+1, dm.seg.parent) + "/" + s
	}
	return s
}

// compareNatural orders strings as people read them: runs of digits compare
// by value, so "n2" sorts before "n10". Strings that tie that way (as "n01"
// and "n1" do) fall back to byte order, so the order is total.
func compareNatural(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if isDigit(a[i]) && isDigit(b[j]) {
			si, sj := i, j
			for si < len(a) && a[si] == '0' {
				si++
			}
			for sj < len(b) && b[sj] == '0' {
				sj++
			}
			ei, ej := si, sj
			for ei < len(a) && isDigit(a[ei]) {
				ei++
			}
			for ej < len(b) && isDigit(b[ej]) {
				ej++
			}
			if c := cmp.Compare(ei-si, ej-sj); c != 0 {
				return c
			}
			if c := strings.Compare(a[si:ei], b[sj:ej]); c != 0 {
				return c
			}
			i, j = ei, ej
			continue
		}
		if a[i] != b[j] {
			return cmp.Compare(a[i], b[j])
		}
		i++
		j++
	}
	if c := cmp.Compare(len(a)-i, len(b)-j); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// compareFit orders domains a and b of level l by best fit: least room
// first. Between domains with equal room, the one inside the fuller parent
// wins, then the fuller grandparent and so on below level end, so that
// small gangs fill up what is already broken into and whole domains stay
// whole higher up too. Tree order breaks what is left. room(m, k) is the
// room for the gang in domain k of level m. It is the one domain order: the
// planner's and the hierarchy search's.
func (t *Tree) compareFit(l int, a, b int32, end int, room func(m int, k int32) int64) int {
	if c := cmp.Compare(room(l, a), room(l, b)); c != 0 {
		return c
	}
	pa, pb := t.dom[l][a].lo, t.dom[l][b].lo
	for m := l + 1; m < end; m++ {
		ka, kb := t.anc[m][pa], t.anc[m][pb]
		if ka == kb {
			break
		}
		if c := cmp.Compare(room(m, ka), room(m, kb)); c != 0 {
			return c
		}
	}
	return cmp.Compare(a, b)
}
