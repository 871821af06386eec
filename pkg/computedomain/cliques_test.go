package computedomain

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestChoose(t *testing.T) {
	// q is a clique with room for slots now, whose jobs leave room for
	// four once they end.
	q := func(name string, slots int) Clique { return Clique{Name: name, Slots: slots, Capacity: 4} }
	ever := func(c Clique, capacity int) Clique { c.Capacity = capacity; return c }
	own := func(c Clique) Clique { c.Own = true; return c }
	in := func(group string, c Clique) Clique { c.Group = group; return c }
	tests := []struct {
		name    string
		cliques []Clique
		members int
		oneOnly bool
		want    Choice
		wantOK  bool
	}{
		{name: "every clique that holds the gang, for the planner to pick",
			cliques: []Clique{q("c2", 4), q("c0", 4), q("c1", 2)}, members: 3,
			want: Choice{Cliques: []string{"c0", "c2"}, Largest: 4}, wantOK: true},
		{name: "the domain's own cliques with room first",
			cliques: []Clique{q("c0", 4), own(q("c1", 3)), own(q("c2", 1))}, members: 3,
			want: Choice{Cliques: []string{"c1"}, Own: true, Largest: 4}, wantOK: true},
		{name: "an own clique without room is no pin",
			cliques: []Clique{own(q("c0", 1)), q("c1", 4), q("c2", 4)}, members: 3,
			want: Choice{Cliques: []string{"c1", "c2"}, Largest: 4}, wantOK: true},
		{name: "no clique holds it: the fewest cliques, largest first",
			cliques: []Clique{q("c0", 4), q("c1", 2), q("c2", 4), q("c3", 3)}, members: 6,
			want: Choice{Cliques: []string{"c0", "c2"}, Span: true, Largest: 4}, wantOK: true},
		{name: "spanning prefers the domain's own cliques when as few do",
			cliques: []Clique{q("c0", 4), q("c1", 4), own(q("c2", 2)), q("c3", 3)}, members: 6,
			want: Choice{Cliques: []string{"c0", "c2"}, Span: true, Largest: 4}, wantOK: true},
		{name: "but never at the cost of one more clique",
			cliques: []Clique{q("c0", 4), q("c1", 4), own(q("c2", 1)), own(q("c3", 1))}, members: 7,
			want: Choice{Cliques: []string{"c0", "c1"}, Span: true, Largest: 4}, wantOK: true},
		{name: "a required clique waits",
			cliques: []Clique{q("c0", 4), q("c1", 4)}, members: 6, oneOnly: true,
			want: Choice{Largest: 4}},
		{name: "a gang a clique could hold waits for it rather than span",
			cliques: []Clique{q("c0", 2), q("c1", 2)}, members: 3,
			want: Choice{Largest: 2}},
		{name: "a gang no clique could hold spans what has room now",
			cliques: []Clique{ever(q("c0", 2), 2), ever(q("c1", 1), 2), ever(q("c2", 2), 2)}, members: 3,
			want: Choice{Cliques: []string{"c0", "c2"}, Span: true, Largest: 2}, wantOK: true},
		{name: "too little room in all cliques",
			cliques: []Clique{q("c0", 2), q("c1", 3)}, members: 6,
			want: Choice{Span: true, Largest: 3}},
		{name: "spanning keeps to one group of the user's required level",
			cliques: []Clique{in("s0", q("c0", 4)), in("s1", q("c1", 4)), in("s1", q("c2", 2)), in("s0", q("c3", 1))}, members: 6,
			want: Choice{Cliques: []string{"c1", "c2"}, Span: true, Largest: 4}, wantOK: true},
		{name: "no group holds it",
			cliques: []Clique{in("s0", q("c0", 4)), in("s1", q("c1", 4))}, members: 6,
			want: Choice{Span: true, Largest: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Choose(tt.cliques, tt.members, tt.oneOnly)
			if ok != tt.wantOK {
				t.Fatalf("Choose ok = %v, want %v (%+v)", ok, tt.wantOK, got)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Choose (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestChooseExhaustive checks Choose against every subset of small random
// fabrics: a single clique when one could hold the gang (those with room
// now, the domain's own when one of those has room), else a set of one
// group with the fewest cliques that hold the gang now, and the most of
// the domain's own among such sets. The oracle enumerates subsets; it
// shares no code with Choose.
func TestChooseExhaustive(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 29))
	for trial := range 3000 {
		n := 1 + rng.IntN(7)
		cliques := make([]Clique, n)
		for i := range cliques {
			slots := rng.IntN(5)
			cliques[i] = Clique{Name: fmt.Sprintf("c%d", i), Slots: slots, Capacity: slots + rng.IntN(3), Own: rng.IntN(3) == 0, Group: fmt.Sprintf("g%d", rng.IntN(2))}
		}
		members := 1 + rng.IntN(12)
		oneOnly := rng.IntN(4) == 0
		got, ok := Choose(cliques, members, oneOnly)

		// The oracle.
		var single, singleOwn []string
		ever := false
		for _, q := range cliques {
			ever = ever || q.Capacity >= members
			if q.Slots >= members {
				single = append(single, q.Name)
				if q.Own {
					singleOwn = append(singleOwn, q.Name)
				}
			}
		}
		bestSize, bestOwn := -1, -1
		for mask := 1; mask < 1<<n; mask++ {
			size, own, room, group, oneGroup := 0, 0, 0, "", true
			for i, q := range cliques {
				if mask&(1<<i) == 0 {
					continue
				}
				if size > 0 && q.Group != group {
					oneGroup = false
				}
				group = q.Group
				size++
				room += q.Slots
				if q.Own {
					own++
				}
			}
			if !oneGroup || room < members {
				continue
			}
			if bestSize < 0 || size < bestSize || size == bestSize && own > bestOwn {
				bestSize, bestOwn = size, own
			}
		}
		desc := fmt.Sprintf("trial %d: %d members (oneOnly %v) in %+v: got %+v, %v", trial, members, oneOnly, cliques, got, ok)
		switch {
		case len(singleOwn) > 0:
			if !ok || got.Span || !slices.Equal(got.Cliques, singleOwn) {
				t.Fatalf("%s; want the own cliques that hold it, %v", desc, singleOwn)
			}
		case len(single) > 0:
			if !ok || got.Span || !slices.Equal(got.Cliques, single) {
				t.Fatalf("%s; want the cliques that hold it, %v", desc, single)
			}
		case oneOnly || ever:
			if ok || got.Span {
				t.Fatalf("%s; want it to wait for one clique", desc)
			}
		case bestSize < 0:
			if ok || !got.Span {
				t.Fatalf("%s; want it to wait for room across cliques", desc)
			}
		default:
			if !ok || !got.Span {
				t.Fatalf("%s; want a span of %d cliques", desc, bestSize)
			}
			size, own, room, groups := 0, 0, 0, map[string]bool{}
			for _, name := range got.Cliques {
				i := slices.IndexFunc(cliques, func(q Clique) bool { return q.Name == name })
				size++
				room += cliques[i].Slots
				groups[cliques[i].Group] = true
				if cliques[i].Own {
					own++
				}
			}
			if size != bestSize || own != bestOwn || room < members || len(groups) != 1 {
				t.Fatalf("%s; want %d cliques of one group, %d own, room for the gang (got %d, %d own, room %d, groups %v)",
					desc, bestSize, bestOwn, size, own, room, groups)
			}
		}
	}
}

// TestChooseIgnoresOrder shuffles the cliques: the choice stays.
func TestChooseIgnoresOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cliques := []Clique{{Name: "a", Slots: 3}, {Name: "b", Slots: 3}, {Name: "c", Slots: 3, Own: true}, {Name: "d", Slots: 2}, {Name: "e", Slots: 3}}
	want, _ := Choose(cliques, 7, false)
	for range 100 {
		rng.Shuffle(len(cliques), func(i, j int) { cliques[i], cliques[j] = cliques[j], cliques[i] })
		got, _ := Choose(cliques, 7, false)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Choose depends on order (-want,+got):\n%s", diff)
		}
	}
}
