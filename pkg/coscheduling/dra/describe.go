package dra

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// DescribeFit returns err with the pass's device dimensions in its reason
// named as Describe names them: the planner writes a request's shape with
// the dimension names it was given, and people never wrote those.
func (d *PassDemand) DescribeFit(req *placement.Request, err *placement.FitError) *placement.FitError {
	out := *err
	out.Reason = d.DescribeText(req, err.Reason) + d.pinnedNote(req)
	return &out
}

// pinnedNote says which members an allocated claim keeps on some nodes
// (capacity.PinnedClaim), "" when none: room elsewhere does not help them,
// and the user may need to free that node or release the claim.
func (d *PassDemand) pinnedNote(req *placement.Request) string {
	var notes []string
	for i, pd := range d.Pods {
		if pd == nil || len(pd.Pinned) == 0 || i >= len(req.Members) {
			continue
		}
		if len(notes) == 3 {
			notes = append(notes, "...")
			break
		}
		for _, p := range pd.Pinned {
			notes = append(notes, fmt.Sprintf("member %s may run only on %s, which holds the devices of its allocated ResourceClaim %s", req.Members[i].Name, p.Nodes(), p.Name))
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return "; " + strings.Join(notes, "; ")
}

// DescribeText replaces, in text, every device dimension of req by its
// description (Describe).
func (d *PassDemand) DescribeText(req *placement.Request, text string) string {
	var dims []string
	for _, name := range req.Resources {
		if capacity.IsDeviceDimension(v1.ResourceName(name)) && strings.Contains(text, name) {
			dims = append(dims, name)
		}
	}
	if len(dims) == 0 {
		return text
	}
	// An "all" dimension extends its kind's name: the longer name is
	// replaced first.
	sort.SliceStable(dims, func(i, j int) bool { return len(dims[i]) > len(dims[j]) })
	pairs := make([]string, 0, 2*len(dims))
	for _, name := range dims {
		pairs = append(pairs, name, d.Describe(name))
	}
	return strings.NewReplacer(pairs...).Replace(text)
}
