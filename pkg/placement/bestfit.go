package placement

// BestFit scores requests and nodes on one scale, for best fit: per
// dimension, the largest allocatable of any node of the Request. Dividing
// by it puts millicores, bytes and device counts on one footing, so that
// no dimension outweighs the others by its unit. Every planner that packs
// by best fit scores with it, so they agree on what "tightest" means.
type BestFit struct {
	// scale is written by NewBestFit and only read afterwards.
	scale Vector
}

// NewBestFit measures req's nodes. Allocatable vectors longer than
// req.Resources are read up to its length.
func NewBestFit(req *Request) BestFit {
	scale := make(Vector, len(req.Resources))
	for i := range req.Nodes {
		for d, q := range req.Nodes[i].Allocatable {
			if d < len(scale) && q > scale[d] {
				scale[d] = q
			}
		}
	}
	return BestFit{scale: scale}
}

// Size measures a request: its share of the scale, summed over dimensions.
// Packing the largest requests first packs best.
func (b BestFit) Size(request Vector) float64 {
	var s float64
	for d, q := range request {
		if b.scale[d] > 0 {
			s += float64(q) / float64(b.scale[d])
		}
	}
	return s
}

// SpareAfter scores what placing request on a node with free capacity
// free leaves over, counting only the dimensions the request uses: the
// smaller, the tighter the fit.
func (b BestFit) SpareAfter(request, free Vector) float64 {
	var s float64
	for d, q := range request {
		if q > 0 && b.scale[d] > 0 {
			s += float64(free[d]-q) / float64(b.scale[d])
		}
	}
	return s
}
