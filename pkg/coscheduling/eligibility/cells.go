package eligibility

import (
	"slices"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
)

// deviceCells is what the node view read its device columns with: the
// columns of the pass, and the device source they read. Every pass reads
// the source anew (the allocated devices, in the API and in flight), but
// between two passes it rarely changes, and then on a few nodes only: the
// view keeps each node's device cells from one pass to the next and reads
// again only the nodes whose devices read differently now (the
// capacity index, for the device source). The zero value has read nothing.
type deviceCells struct {
	// cols are the pass's columns, devices or not, in dimension order.
	cols []dra.Column
	// src is the device source the columns read; nil when none does.
	src *capacity.Devices
	// prev is the source the view's cells were read with before src.
	prev *capacity.Devices
}

// next returns the cells of a pass with cols, and whether they read a node
// as c's did, given the same devices: the same dimensions from the same
// sources, devices of the same kinds. When they do not, every node is to
// be read again.
func (c deviceCells) next(cols []dra.Column) (deviceCells, bool) {
	n := deviceCells{cols: cols, prev: c.src}
	for i := range cols {
		if cols[i].MayUseDevices {
			n.src = cols[i].Devices.Source()
			break
		}
	}
	same := slices.EqualFunc(c.cols, cols, func(a, b dra.Column) bool {
		return a.Name == b.Name && a.MayUseDevices == b.MayUseDevices && (!a.MayUseDevices || a.Devices.Same(b.Devices))
	})
	return n, same
}

// unchangedOn reports whether node's device cells, as read with the
// previous source, still hold: no column reads devices, or the node's
// devices and their allocations are as they were.
func (c deviceCells) unchangedOn(node string) bool {
	return c.unchangedEverywhere() || c.src.UnchangedOn(c.prev, node)
}

// unchangedEverywhere reports whether every node's device cells still
// hold: no column reads devices, or no device moved anywhere. A pass asks
// once, not per node, so that it need not read each node's name.
func (c deviceCells) unchangedEverywhere() bool {
	return c.src == nil || c.src.Unchanged(c.prev)
}
