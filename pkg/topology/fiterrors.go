package topology

import (
	"fmt"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// requiredFitError says that no domain of the required level l holds the
// gang, with the roomiest one's numbers.
func (u *usage) requiredFitError(l int) *placement.FitError {
	t := u.tree
	k := u.roomiest(l)
	room := u.roomFor(l, k)
	return &placement.FitError{
		Placed: int(room),
		Wanted: len(u.req.Members),
		Reason: fmt.Sprintf("required %s (%s): no %s holds %s; the roomiest, %s, has room for %d",
			t.levels[l].Name, t.levels[l].Key, t.levels[l].Name, u.describeGang(), t.name(l, k), room),
	}
}

// nearFitError says that the domain of the required level l that runs the
// gang's other members, k, has no room for the new ones.
func (u *usage) nearFitError(l int, k int32) *placement.FitError {
	t := u.tree
	room := u.roomFor(l, k)
	return &placement.FitError{
		Placed: int(room),
		Wanted: len(u.req.Members),
		Reason: fmt.Sprintf("required %s (%s): %s, the %s that runs the gang's other members, has room for %d of %s",
			t.levels[l].Name, t.levels[l].Key, t.name(l, k), t.levels[l].Name, room, u.describeGang()),
	}
}

// packFitError says that the gang's shapes, though each fits alone in some
// domain of level l, do not pack together into any.
func (u *usage) packFitError(l int) *placement.FitError {
	t := u.tree
	where := "any " + t.levels[l].Name
	if l == t.top() {
		where = "the cluster"
	}
	return &placement.FitError{
		Wanted: len(u.req.Members),
		Reason: fmt.Sprintf("%s do not pack together into %s, though each request shape fits alone", u.describeGang(), where),
	}
}

// describeGang names the bound members for messages.
func (u *usage) describeGang() string {
	if len(u.bound) == 1 {
		return fmt.Sprintf("the %s asking %s", count(int(u.total), "pod"), placement.Describe(u.req.Resources, u.bound[0].request))
	}
	return fmt.Sprintf("the %s", count(int(u.total), "pod"))
}
