package capacity

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// maxComponent bounds how many overlapping kinds one gang may ask for and
// still be counted exactly: Hall's condition needs one union dimension per
// subset of two or more kinds, 11 for four.
const maxComponent = 4

// Demand is what a gang's members ask of devices, in planner dimensions.
type Demand struct {
	// Extra[i] is what member i asks for in device dimensions, beyond its
	// plain Amounts: each kind it takes devices of, each union dimension
	// over kinds that share devices, and "all" dimensions.
	Extra []Amounts
	// Unions maps each union dimension to the dimensions it covers. They
	// make overlapping kinds exact: devices of kinds K1..Kn on one node can
	// serve demands d1..dn together if and only if, for every subset S of
	// the kinds, the demands of S fit in the free devices of S's union
	// (Hall's theorem).
	Unions map[v1.ResourceName][]v1.ResourceName
	// Exact[i] is false when the model cannot count member i's devices
	// exactly; Why says why.
	Exact []bool
	Why   []string
	// Chosen names, per firstAvailable request, the subrequest the demand
	// plans with ("claim/request: subrequest"), in member order.
	Chosen []string
	// Accelerated[i] is set when member i takes devices.
	Accelerated []bool
}

// GangDemand turns the members' device demand (in rank order) into planner
// dimensions. A claim used by several members is counted once, for the
// first of them. A firstAvailable request plans with its alternative number
// alt (the last one when it has fewer).
func (d *Devices) GangDemand(ctx context.Context, members []*PodDevices, alt int) *Demand {
	out := &Demand{
		Extra:       make([]Amounts, len(members)),
		Exact:       make([]bool, len(members)),
		Why:         make([]string, len(members)),
		Accelerated: make([]bool, len(members)),
	}
	seen := map[types.UID]bool{}
	// kinds are the device kinds the gang asks for, by dimension; mapped
	// extended resources stand for their class's kind on nodes that do not
	// advertise them.
	kinds := map[v1.ResourceName]*Kind{}
	for i, m := range members {
		out.Exact[i] = true
		if m == nil {
			continue
		}
		if len(m.Inexact) > 0 {
			out.Exact[i] = false
			out.Why[i] = strings.Join(m.Inexact, "; ")
		}
		extra := Amounts{}
		for _, c := range m.Claims {
			if seen[c.UID] {
				out.Accelerated[i] = true // it shares devices with a sibling
				continue
			}
			seen[c.UID] = true
			for _, r := range c.Requests {
				a := r.Alternatives[min(alt, len(r.Alternatives)-1)]
				k := d.registry.Add(a.Kind)
				if len(r.Alternatives) > 1 {
					out.Chosen = append(out.Chosen, fmt.Sprintf("%s/%s: %s", c.Name.Name, r.Name, a.SubRequest))
				}
				if a.All {
					extra[allDimension(k.Dimension)]++
				} else {
					extra[k.Dimension] += a.Count
					kinds[k.Dimension] = k
				}
				out.Accelerated[i] = true
			}
		}
		for _, mp := range m.Mapped {
			kinds[mp.Resource] = d.registry.Add(mp.Kind)
			out.Accelerated[i] = true
		}
		if len(extra) > 0 {
			out.Extra[i] = extra
		}
	}
	d.addUnions(ctx, out, kinds, members)
	return out
}

// addUnions finds the gang's kinds that share devices on some node and adds
// a union dimension for every subset of two or more of each group.
func (d *Devices) addUnions(ctx context.Context, out *Demand, kinds map[v1.ResourceName]*Kind, members []*PodDevices) {
	if len(kinds) < 2 {
		return
	}
	dims := make([]v1.ResourceName, 0, len(kinds))
	for dim := range kinds {
		dims = append(dims, dim)
	}
	slices.Sort(dims)
	// Union-find over kinds that overlap on some node.
	parent := make([]int, len(dims))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			i = parent[i]
		}
		return i
	}
	// partial[i] is set when kind i shares some devices of a node with
	// another kind, but not all.
	partial := make([]bool, len(dims))
	inv := d.matcher.Inventory()
	for _, node := range inv.Nodes() {
		sets := make([]Bits, len(dims))
		for i, dim := range dims {
			sets[i] = d.matcher.On(ctx, kinds[dim], node)
		}
		for i := range dims {
			for j := i + 1; j < len(dims); j++ {
				if sets[i].Intersects(sets[j]) {
					parent[find(j)] = find(i)
					if sets[i].CountWithout(sets[j]) > 0 || sets[j].CountWithout(sets[i]) > 0 {
						partial[i], partial[j] = true, true
					}
				}
			}
		}
	}
	groups := map[int][]v1.ResourceName{}
	partialGroup := map[int]bool{}
	for i, dim := range dims {
		r := find(i)
		groups[r] = append(groups[r], dim)
		partialGroup[r] = partialGroup[r] || partial[i]
	}
	roots := make([]int, 0, len(groups))
	for r := range groups {
		roots = append(roots, r)
	}
	slices.Sort(roots)
	for _, r := range roots {
		group := groups[r]
		if len(group) < 2 {
			continue
		}
		if len(group) > maxComponent {
			for i := range members {
				if asksAny(out.Extra[i], members[i], group) {
					out.Exact[i] = false
					out.Why[i] = strings.TrimPrefix(out.Why[i]+fmt.Sprintf("; %d device kinds share devices", len(group)), "; ")
				}
			}
			continue
		}
		if partialGroup[r] {
			markSequential(out, members, group)
		}
		for mask := 1; mask < 1<<len(group); mask++ {
			var parts []v1.ResourceName
			for b := range group {
				if mask&(1<<b) != 0 {
					parts = append(parts, group[b])
				}
			}
			if len(parts) < 2 {
				continue
			}
			dim := unionDimension(parts)
			if out.Unions == nil {
				out.Unions = map[v1.ResourceName][]v1.ResourceName{}
			}
			out.Unions[dim] = parts
			for i := range members {
				var sum int64
				for _, p := range parts {
					sum += out.Extra[i][p] + mappedCount(members[i], p)
				}
				if sum > 0 {
					if out.Extra[i] == nil {
						out.Extra[i] = Amounts{}
					}
					out.Extra[i][dim] = sum
				}
			}
		}
	}
}

// markSequential marks inexact the members that ask for devices of group,
// a group of kinds some of which share only part of their devices on a
// node, when more than one member asks. Hall's condition is what the
// allocator meets for the claims of one pod, which it allocates together;
// DynamicResources allocates each member's claims on its own, first fit,
// so an earlier member may take the devices a later one alone could use
// (2 of any GPU take the one free A100 that a later member's claim for an
// A100 needed). The union dimensions still hold as a necessary condition.
func markSequential(out *Demand, members []*PodDevices, group []v1.ResourceName) {
	var asking []int
	for i := range members {
		if asksAny(out.Extra[i], members[i], group) {
			asking = append(asking, i)
		}
	}
	if len(asking) < 2 {
		return
	}
	for _, i := range asking {
		out.Exact[i] = false
		out.Why[i] = strings.TrimPrefix(out.Why[i]+fmt.Sprintf("; members ask for %d device kinds that share part of a node's devices", len(group)), "; ")
	}
}

// asksAny reports whether a member asks for any of dims.
func asksAny(extra Amounts, m *PodDevices, dims []v1.ResourceName) bool {
	for _, dim := range dims {
		if extra[dim] > 0 || mappedCount(m, dim) > 0 {
			return true
		}
	}
	return false
}

// mappedCount is how much of a mapped extended resource a member asks for.
func mappedCount(m *PodDevices, name v1.ResourceName) int64 {
	if m == nil {
		return 0
	}
	for _, mp := range m.Mapped {
		if mp.Resource == name {
			return mp.Count
		}
	}
	return 0
}

// allDimension is the dimension of "every device of kind dim on the node".
func allDimension(dim v1.ResourceName) v1.ResourceName { return dim + allSuffix }

const allSuffix = "-all"

// allBase returns the kind dimension of an "all" dimension.
func allBase(dim v1.ResourceName) (v1.ResourceName, bool) {
	if !IsDeviceDimension(dim) || !strings.HasSuffix(string(dim), allSuffix) {
		return "", false
	}
	return v1.ResourceName(strings.TrimSuffix(string(dim), allSuffix)), true
}

// unionDimension names the union of parts (sorted).
func unionDimension(parts []v1.ResourceName) v1.ResourceName {
	h := fnv.New64a()
	for _, p := range parts {
		fmt.Fprintf(h, "%s\x00", p)
	}
	return v1.ResourceName(fmt.Sprintf("%sunion-%016x", DimensionPrefix, h.Sum64()))
}

// DescribeDimension names a dimension for people: a resource name, or the
// devices a kind takes.
func (d *Devices) DescribeDimension(dim v1.ResourceName, unions map[v1.ResourceName][]v1.ResourceName) string {
	if parts, ok := unions[dim]; ok {
		names := make([]string, len(parts))
		for i, p := range parts {
			names[i] = d.DescribeDimension(p, nil)
		}
		return "devices of " + strings.Join(names, " or ")
	}
	if base, ok := allBase(dim); ok {
		return "all " + d.DescribeDimension(base, nil)
	}
	if k, ok := d.registry.Kind(dim); ok {
		return k.Describe()
	}
	return string(dim)
}
