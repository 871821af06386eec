package computedomain

import (
	"cmp"
	"slices"
)

// Clique is one NVLink clique a domain's gang may use. The caller leaves
// out the cliques it may not use (another domain runs there and the
// gang's PodGroup does not allow sharing).
type Clique struct {
	// Name is the clique's label value.
	Name string
	// Group names the domain of the user's required topology level, looser
	// than a clique, that the clique lies in: a gang that spans cliques
	// keeps to one group. "" when the user requires no such level.
	Group string
	// Slots is how many of the gang's domain members the clique has room
	// for now.
	Slots int
	// Capacity is how many it would have room for once the jobs running
	// in it end: whether the gang is ever to fit in one clique.
	Capacity int
	// Own is set when the gang's own domain already runs in the clique.
	Own bool
}

// Choice is the cliques a domain's gang is planned in.
type Choice struct {
	// Cliques are in name order. Without Span, each of them holds the
	// whole gang and the planner puts it in one; with Span, the gang
	// needs all of them. Empty when the gang waits.
	Cliques []string
	// Span is set when no clique could ever hold the whole gang, and the
	// gang may span cliques.
	Span bool
	// Own is set when the cliques are all ones the domain already runs in.
	Own bool
	// Largest is the most members any one clique has room for.
	Largest int
}

// Choose picks the cliques a gang of members domain members is planned in.
// A gang that some clique could hold, once the jobs running there end,
// stays in one clique: the cliques with room for it now are the
// candidates, those the domain already runs in first if any has room, and
// the planner's own scores pick one of them. So does a gang whose user
// requires one clique (oneOnly). Only a gang no clique could hold spans
// cliques: the fewest that hold it now, of one group; among those sets,
// the one with the most cliques the domain already runs in, then the one
// in the least group by name; inside that, larger cliques before smaller
// and names break ties. ok is false when the gang must wait: for one
// clique with room (Span unset), or for room across cliques (Span set).
func Choose(cliques []Clique, members int, oneOnly bool) (c Choice, ok bool) {
	if members <= 0 {
		return Choice{}, false
	}
	var fit, ownFit []string
	ever := false
	for _, q := range cliques {
		c.Largest = max(c.Largest, q.Slots)
		ever = ever || q.Capacity >= members
		if q.Slots >= members {
			fit = append(fit, q.Name)
			if q.Own {
				ownFit = append(ownFit, q.Name)
			}
		}
	}
	switch {
	case len(ownFit) > 0:
		c.Cliques, c.Own = ownFit, true
	case len(fit) > 0:
		c.Cliques = fit
	case ever || oneOnly:
		return c, false
	default:
		c.Span = true
		best, found := spanGroups(cliques, members)
		if !found {
			return c, false
		}
		c.Cliques, c.Own = best.names, best.own == len(best.names)
	}
	slices.Sort(c.Cliques)
	return c, true
}

// span is one group's fewest cliques.
type span struct {
	group string
	names []string
	own   int
}

// better orders spans: fewer cliques, then more of the domain's own, then
// the group's name.
func (s span) better(o span) bool {
	if len(s.names) != len(o.names) {
		return len(s.names) < len(o.names)
	}
	if s.own != o.own {
		return s.own > o.own
	}
	return s.group < o.group
}

// spanGroups returns the best span over the groups of cliques.
func spanGroups(cliques []Clique, members int) (best span, found bool) {
	byGroup := map[string][]Clique{}
	for _, q := range cliques {
		if q.Slots > 0 {
			byGroup[q.Group] = append(byGroup[q.Group], q)
		}
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	for _, g := range groups {
		s, ok := spanGroup(byGroup[g], members)
		if !ok {
			continue
		}
		s.group = g
		if !found || s.better(best) {
			best, found = s, true
		}
	}
	return best, found
}

// spanGroup returns the fewest of cliques that hold members, with as many
// of the domain's own as such a set can have. The fewest is the shortest
// prefix of the cliques by room, largest first; a set of k cliques with j
// of the domain's own holds the most with the j roomiest own and the k-j
// roomiest others, so the largest j whose such set holds members wins.
func spanGroup(cliques []Clique, members int) (span, bool) {
	byRoom := func(a, b Clique) int {
		return cmp.Or(cmp.Compare(b.Slots, a.Slots), cmp.Compare(a.Name, b.Name))
	}
	all := slices.SortedFunc(slices.Values(cliques), byRoom)
	k, sum := 0, 0
	for k < len(all) && sum < members {
		sum += all[k].Slots
		k++
	}
	if sum < members {
		return span{}, false
	}
	var own, other []Clique
	for _, q := range all {
		if q.Own {
			own = append(own, q)
		} else {
			other = append(other, q)
		}
	}
	for j := min(k, len(own)); j >= 0; j-- {
		if k-j > len(other) {
			break
		}
		picked := append(slices.Clone(own[:j]), other[:k-j]...)
		room := 0
		for _, q := range picked {
			room += q.Slots
		}
		if room < members {
			continue
		}
		names := make([]string, len(picked))
		for i, q := range picked {
			names[i] = q.Name
		}
		return span{names: names, own: j}, true
	}
	// Unreachable: j = the own among the first k by room gives a set that
	// holds members.
	return span{}, false
}
