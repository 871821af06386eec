package placementtest

import (
	"context"
	"errors"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// planGroups is Greedy.Plan for a request whose nodes are split into
// groups: it places the gang in every group (only the anchors' group for a
// running gang's new members) and keeps the complete placement on the
// fewest nodes, then in the group with the least free room, then the first
// group.
func (g Greedy) planGroups(ctx context.Context, req *placement.Request) (*placement.Plan, error) {
	if err := req.Groups.Validate(len(req.Nodes)); err != nil {
		return nil, err
	}
	groups := make([]int, len(req.Groups.Names))
	for k := range groups {
		groups[k] = k
	}
	if k := req.AnchorGroup(); k >= 0 {
		groups = []int{k}
	}
	fit := placement.NewBestFit(req)
	tries := make([]*placement.FitError, len(req.Groups.Names))
	var best *placement.Plan
	bestNodes, bestRoom, bestGroup := 0, 0.0, -1
	for _, k := range groups {
		sub := req.InGroup(k)
		plan, err := g.plan(ctx, sub)
		var fe *placement.FitError
		switch {
		case errors.As(err, &fe):
			tries[k] = fe
			continue
		case err != nil:
			return nil, err
		}
		used := plan.Spans[0].Domains
		room := groupRoom(req, k, fit)
		if best == nil || used < bestNodes || used == bestNodes && room < bestRoom {
			best, bestNodes, bestRoom, bestGroup = plan, used, room, k
		}
	}
	if best == nil {
		return nil, req.Groups.NoGroupFits(len(req.Members), tries)
	}
	best.Summary += " in group " + req.Groups.Names[bestGroup]
	return best, nil
}

// groupRoom is the free capacity of group k's nodes on the dimensions the
// gang's accelerated members ask for, measured by fit: best fit between
// groups.
func groupRoom(req *placement.Request, k int, fit placement.BestFit) float64 {
	asked := make([]bool, len(req.Resources))
	for _, m := range req.Members {
		if m.Accelerated {
			for d, q := range m.Request {
				asked[d] = asked[d] || q > 0
			}
		}
	}
	var room float64
	free := make(placement.Vector, len(req.Resources))
	for i, n := range req.Nodes {
		if req.Groups.Of[i] != k {
			continue
		}
		for d := range free {
			free[d] = 0
			if d < len(n.Free) && asked[d] && n.Free[d] > 0 {
				free[d] = n.Free[d]
			}
		}
		room += fit.Size(free)
	}
	return room
}
