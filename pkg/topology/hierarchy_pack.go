package topology

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/go-logr/logr"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// packJob is the members of the leaf subgroups that share one domain, or,
// for a joint pack, of several nested domains (see pack).
type packJob struct {
	l       int
	k       int32
	members []int
	// inner lists, for a joint pack, the jobs whose domains lie inside
	// this one's, their members confined to them; own are the members of
	// the outermost domain's own leaves.
	inner []packJob
	own   []int
}

// pack puts the bound members of every leaf subgroup on nodes of the domain
// the search gave it, as the flat planner packs a gang into a domain: fewest
// sub-domains, loosest level first, then best fit, neighbouring ranks on
// neighbouring nodes. Leaves that share a domain are packed together, so
// that their shapes compete for nodes exactly. Domains that nest are packed
// tighter first, each on what the ones before left: a node's capacity used
// by one subgroup is gone for the next. With one request shape that order
// never blocks a later domain, the search having counted the slots of every
// domain; with several it could, so nested domains whose members ask for
// different shapes are packed as one job in the outermost, each member
// confined to its own domain by its eligibility. It returns the witness, or
// nil and why the members do not pack.
func (s *search) pack() (*witness, string, error) {
	h := s.h
	var jobs []packJob
	for g := range h.sg {
		sg := &h.sg[g]
		if !sg.leaf || sg.total == 0 {
			continue
		}
		l, k := s.eff[g], s.domOf(g)
		j := slices.IndexFunc(jobs, func(j packJob) bool { return j.l == l && j.k == k })
		if j < 0 {
			jobs = append(jobs, packJob{l: l, k: k})
			j = len(jobs) - 1
		}
		jobs[j].members = append(jobs[j].members, sg.bound...)
	}
	w := &witness{nodeOf: make([]int, len(h.req.Members)), exact: true}
	for i := range w.nodeOf {
		w.nodeOf[i] = -1
	}
	if h.nodes == nil {
		h.nodes, h.mark = slices.Clone(h.req.Nodes), make([]bool, len(h.req.Nodes))
	}
	p := &packer2{h: h, w: w, nodes: h.nodes, caps: newCapCounts(h)}
	defer p.reset()
	for _, j := range h.nestJobs(jobs) {
		if reason, err := p.placeNested(j); reason != "" || err != nil {
			return nil, reason, err
		}
	}
	w.common = h.commonLevels(w.nodeOf)
	return w, "", nil
}

// reset gives back the Free of every node a pack took from: h.nodes is
// shared by every pack of the call.
func (p *packer2) reset() {
	for _, n := range p.touched {
		p.nodes[n].Free, p.h.mark[n] = p.h.req.Nodes[n].Free, false
	}
}

// placeNested places a joint job's inner jobs one after another, tightest
// first, each packed as tightly as it goes, and falls back to packing them
// all together only when that fails. Other jobs it places as they are.
func (p *packer2) placeNested(j packJob) (string, error) {
	if len(j.inner) == 0 {
		return p.place(j)
	}
	saved := p.save()
	seq := append(slices.Clone(j.inner), packJob{l: j.l, k: j.k, members: j.own})
	for _, ij := range seq {
		reason, err := p.place(ij)
		if err != nil {
			return "", err
		}
		if reason != "" {
			p.restore(saved)
			return p.place(j)
		}
	}
	return "", nil
}

// packState is what place changes, to undo a sequence that failed.
type packState struct {
	free  []placement.Vector // of the nodes touched so far
	on    [][]int32
	exact bool
}

func (p *packer2) save() packState {
	st := packState{exact: p.w.exact}
	for _, n := range p.touched {
		st.free = append(st.free, p.nodes[n].Free.Clone())
	}
	for _, on := range p.caps.on {
		st.on = append(st.on, slices.Clone(on))
	}
	return st
}

func (p *packer2) restore(st packState) {
	for i, n := range p.touched {
		if i < len(st.free) {
			p.nodes[n].Free = st.free[i]
			continue
		}
		p.nodes[n].Free = p.h.req.Nodes[n].Free
		p.h.mark[n] = false
	}
	p.touched = p.touched[:len(st.free)]
	p.w.exact, p.caps.on = st.exact, st.on
}

// nestJobs orders jobs tightest domain first and merges nested ones whose
// members ask for more than one shape into a joint job (see pack).
func (h *hier) nestJobs(jobs []packJob) []packJob {
	t := h.t
	slices.SortFunc(jobs, func(a, b packJob) int { return cmp.Or(cmp.Compare(a.l, b.l), cmp.Compare(a.k, b.k)) })
	inside := func(a, b packJob) bool { // a's domain lies inside b's
		return a.l < b.l && t.anc[b.l][t.dom[a.l][a.k].lo] == b.k
	}
	outer := make([]int, len(jobs))
	for a := range jobs {
		outer[a] = a
		for b := range jobs {
			if inside(jobs[a], jobs[b]) && jobs[b].l > jobs[outer[a]].l {
				outer[a] = b
			}
		}
	}
	var out []packJob
	for a := range jobs {
		if outer[a] != a {
			continue
		}
		shapes := map[int]bool{}
		nested := 0
		for b := range jobs {
			if outer[b] == a {
				nested++
				for _, i := range jobs[b].members {
					shapes[h.shapeOf[i]] = true
				}
			}
		}
		if nested == 1 || len(shapes) == 1 {
			for b := range jobs {
				if outer[b] == a {
					out = append(out, jobs[b])
				}
			}
			continue
		}
		joint := packJob{l: jobs[a].l, k: jobs[a].k, members: slices.Clone(jobs[a].members), own: jobs[a].members}
		for b := range jobs {
			if outer[b] == a && b != a {
				joint.inner = append(joint.inner, jobs[b])
				joint.members = append(joint.members, jobs[b].members...)
			}
		}
		out = append(out, joint)
	}
	// Disjoint domains do not compete; tightest first keeps nested ones
	// in the order pack wants.
	slices.SortStableFunc(out, func(a, b packJob) int { return cmp.Compare(a.l, b.l) })
	return out
}

// packer2 places jobs one after another on what the ones before left.
type packer2 struct {
	h *hier
	w *witness
	// nodes is h.nodes: the request's, but for the Free of the nodes that
	// jobs took from (touched), which are copies: the request is never
	// written.
	nodes   []placement.Node
	touched []int
	caps    *capCounts
}

// place packs job j into its domain and records where its members go; a
// non-empty reason says why they do not fit.
func (p *packer2) place(j packJob) (string, error) {
	h, t := p.h, p.h.t
	slices.Sort(j.members)
	ms := make([]placement.Member, len(j.members))
	shapes := make([]int, len(j.members))
	for x, i := range j.members {
		ms[x], shapes[x] = h.req.Members[i], h.shapeOf[i]
	}
	confine(t, ms, j)
	nodes, resources := p.caps.extend(p.nodes, h.req.Resources, ms, shapes)
	sub := &placement.Request{Gang: h.req.Gang, Resources: resources, Nodes: nodes,
		NodeGeneration: h.req.NodeGeneration, Members: ms}
	su, err := newUsageIn(t, sub, j.l, j.k)
	if err != nil {
		return "", err
	}
	if h.packAll { // packing is part of the search only then
		if err := h.spend(); err != nil {
			return "", err
		}
	}
	var ch *choice
	if su.fits(j.l, j.k) {
		if ch, err = h.p.pick(h.ctx, logr.Discard(), su, j.l, []int32{j.k}, &h.pack); err != nil {
			return "", err
		}
	}
	if ch == nil {
		return h.packFailure(j), nil
	}
	nodeOf := make([]int, len(ms))
	su.assignRanks(ch.placed, nodeOf)
	for x, i := range j.members {
		n := nodeOf[x]
		p.caps.add(shapes[x], n)
		if !h.mark[n] {
			p.nodes[n].Free, h.mark[n] = p.nodes[n].Free.Clone(), true
			p.touched = append(p.touched, n)
		}
		p.nodes[n].Free.Sub(h.req.Members[i].Request)
		p.w.nodeOf[i] = n
	}
	p.w.exact = p.w.exact && ch.exact
	return "", nil
}

// confine narrows the eligibility of the members ms of joint job j that
// belong to its inner jobs to their own domain's nodes. Members that shared
// an eligibility slice and a range of nodes share the narrowed slice, as the
// packer expects; an inner domain with all of j's nodes narrows nothing.
func confine(t *Tree, ms []placement.Member, j packJob) {
	type key struct {
		lo, hi int32
		elig   *bool
	}
	whole := &t.dom[j.l][j.k]
	narrowed := map[key][]bool{}
	for x := range ms {
		in := -1
		for c, ij := range j.inner {
			if slices.Contains(ij.members, j.members[x]) {
				in = c
			}
		}
		if in < 0 {
			continue
		}
		d := &t.dom[j.inner[in].l][j.inner[in].k]
		if d.lo == whole.lo && d.hi == whole.hi {
			continue
		}
		e := ms[x].Eligible
		k := key{lo: d.lo, hi: d.hi}
		if len(e) > 0 {
			k.elig = &e[0]
		}
		out, ok := narrowed[k]
		if !ok {
			out = make([]bool, len(t.node))
			for p := d.lo; p < d.hi; p++ {
				n := t.node[p]
				out[n] = e == nil || e[n]
			}
			narrowed[k] = out
		}
		ms[x].Eligible = out
	}
}

// packFailure says that job's members fit their domain shape by shape but
// not together.
func (h *hier) packFailure(j packJob) string {
	var names []string
	for g := range h.sg {
		if h.sg[g].leaf && len(h.sg[g].bound) > 0 && slices.Contains(j.members, h.sg[g].bound[0]) {
			names = append(names, fmt.Sprintf("%q", h.refs[g].Label()))
		}
	}
	return fmt.Sprintf("the %s of subgroup %s do not pack together into %s %s, though each request shape fits",
		count(len(j.members), "pod"), joinAnd(names), h.t.levels[j.l].Name, h.t.name(j.l, j.k))
}

// capCounts keeps MaxPerNode caps across subgroups packed one after
// another. Each capped shape gets an extra dimension in the jobs' requests:
// a node's free amount in it is what the cap leaves on the node, and each
// member of the shape asks one, so the packer keeps the cap exactly.
type capCounts struct {
	h *hier
	// capped lists the bound shapes with a cap; on[j][n] counts the members
	// of shape capped[j] placed on node n so far.
	capped []int
	on     [][]int32
}

func newCapCounts(h *hier) *capCounts {
	c := &capCounts{h: h}
	for s := range h.u.bound {
		if h.u.bound[s].perNode < maxNodeSlots {
			c.capped = append(c.capped, s)
			c.on = append(c.on, make([]int32, len(h.req.Nodes)))
		}
	}
	return c
}

// extend returns nodes and resources with the caps' dimensions added, and
// extends the requests of ms, members of the given shapes, in place.
// Without caps it returns nodes and resources as they are.
func (c *capCounts) extend(nodes []placement.Node, resources []string, ms []placement.Member, shapes []int) ([]placement.Node, []string) {
	if len(c.capped) == 0 {
		return nodes, resources
	}
	out := make([]placement.Node, len(nodes))
	for i := range nodes {
		out[i] = nodes[i]
		out[i].Free = slices.Grow(nodes[i].Free.Clone(), len(c.capped))
		out[i].Allocatable = slices.Grow(nodes[i].Allocatable.Clone(), len(c.capped))
		for j, s := range c.capped {
			limit := c.h.u.bound[s].perNode
			out[i].Free = append(out[i].Free, limit-int64(c.on[j][i]))
			out[i].Allocatable = append(out[i].Allocatable, limit)
		}
	}
	resources = slices.Clone(resources)
	for _, s := range c.capped {
		resources = append(resources, fmt.Sprintf("members like %s per node", c.h.req.Members[c.h.u.bound[s].members[0]].Name))
	}
	for x := range ms {
		r := slices.Grow(ms[x].Request.Clone(), len(c.capped))
		for _, s := range c.capped {
			r = append(r, int64(boolInt(shapes[x] == s)))
		}
		ms[x].Request = r
	}
	return out, resources
}

// add counts a member of shape s on node n.
func (c *capCounts) add(s, n int) {
	if j := slices.Index(c.capped, s); j >= 0 {
		c.on[j][n]++
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// commonLevels finds, for every subgroup, the tightest level whose one
// domain holds all its bound members; -1 for a subgroup without any.
func (h *hier) commonLevels(nodeOf []int) []int {
	t := h.t
	out := make([]int, len(h.refs))
	for g := range h.refs {
		out[g] = -1
		first, l := int32(-1), 0
		for _, i := range h.refs[g].Members {
			if h.shapeOf[i] < 0 {
				continue
			}
			p := t.pos[nodeOf[i]]
			if first < 0 {
				first = p
			}
			for l < t.top() && t.anc[l][p] != t.anc[l][first] {
				l++
			}
		}
		if first >= 0 {
			out[g] = l
		}
	}
	return out
}

// placeLoose places the members not bound by topology once the bound ones
// hold their nodes, with the flat planner's rule: the gang's nodes first,
// then the rest of the root's domain (positions lo..hi-1), then any.
func (h *hier) placeLoose(nodeOf []int, lo, hi int32) ([]int32, error) {
	type slot struct{ pos, shape int32 }
	n := map[slot]int32{}
	var keys []slot
	for i, node := range nodeOf {
		if s := h.shapeOf[i]; s >= 0 {
			k := slot{h.t.pos[node], int32(s)}
			if n[k] == 0 {
				keys = append(keys, k)
			}
			n[k]++
		}
	}
	pl := make([]placed, len(keys))
	for i, k := range keys {
		pl[i] = placed{pos: k.pos, shape: k.shape, count: n[k]}
	}
	return h.u.placeLoose(pl, lo, hi, nodeOf)
}

// joinAnd joins names as people list them: "a", "a and b", "a, b and c".
func joinAnd(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	out := names[0]
	for _, s := range names[1 : len(names)-1] {
		out += ", " + s
	}
	return out + " and " + names[len(names)-1]
}
