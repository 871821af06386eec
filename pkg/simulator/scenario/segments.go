package scenario

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Segments make a gang hierarchical: its members, in rank order, are cut
// into segments of Size consecutive ranks, each of which must sit inside
// one domain of Level (tensor-parallel ranks in one NVLink clique), while
// the gang's Topology holds for the whole. Each profile states the same
// hierarchy in its own form (see package workload): gpu-gang as segment
// annotations on its PodGroup (or Kueue's podset-slice annotations on the
// pods), the native profiles as a CompositePodGroup whose children are one
// PodGroup per segment, the default profile not at all.
type Segments struct {
	// Size is the members per segment; it must divide every member count
	// the gang can draw.
	Size int `json:"size"`
	// Level is "clique", "leaf" or "spine": the tier one domain of which
	// must hold each segment. It is a hard constraint, and no looser than
	// the gang's own level.
	Level string `json:"level"`
	// MinCount is how many segments must start together (a composite's
	// minGroupCount); default all of them. The rest may start later.
	MinCount int `json:"minCount,omitempty"`
	// Kueue states the segments, for the gpu-gang profile, as Kueue's
	// pod-template annotations (podset-slice-size and
	// podset-slice-required-topology, with the gang's level as
	// podset-required-topology or -preferred-topology) instead of the
	// PodGroup's gpu-gang.x-k8s.io annotations.
	Kueue bool `json:"kueue,omitempty"`
}

// Tiers lists the fabric tiers tightest first; a tier's position is its
// index in fabric.Layout.TierKeys and fabric.NodeInfo.Domain.
var Tiers = []string{TierClique, TierLeaf, TierSpine}

// TierIndex returns level's position in Tiers, or -1.
func TierIndex(level string) int { return slices.Index(Tiers, level) }

// Count returns the number of segments of a gang of pods members.
func (s *Segments) Count(pods int) int { return pods / s.Size }

// Min returns how many segments of a gang of pods members must start
// together.
func (s *Segments) Min(pods int) int {
	if s.MinCount > 0 {
		return s.MinCount
	}
	return s.Count(pods)
}

// Quorum returns the members the gang needs to start: every member, or
// Segments.Min whole segments.
func (j *Job) Quorum() int {
	if j.Segments == nil {
		return j.Pods
	}
	return j.Segments.Min(j.Pods) * j.Segments.Size
}

// SegmentOf returns the segment of the member of rank rank.
func (j *Job) SegmentOf(rank int) int { return rank / j.Segments.Size }

// values lists every value Draw can return.
func (r IntRange) values() []int {
	if len(r.Choices) > 0 {
		return r.Choices
	}
	var out []int
	for v := r.Min; v <= max(r.Min, r.Max); v++ {
		out = append(out, v)
	}
	return out
}

// validateSegments checks a gang's segments against every member count it
// can draw and against its own level.
func validateSegments(s *Segments, pods []int, gang *Topology, path *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	if s.Size < 1 {
		return append(errs, field.Invalid(path.Child("size"), s.Size, "must be at least 1"))
	}
	switch lv := TierIndex(s.Level); {
	case lv < 0:
		errs = append(errs, field.NotSupported(path.Child("level"), s.Level, Tiers))
	case gang != nil && TierIndex(gang.Level) >= 0 && lv > TierIndex(gang.Level):
		errs = append(errs, field.Invalid(path.Child("level"), s.Level, fmt.Sprintf("is looser than the gang's level %s: a segment is part of the gang", gang.Level)))
	}
	for _, n := range pods {
		if n%s.Size != 0 {
			errs = append(errs, field.Invalid(path.Child("size"), s.Size, fmt.Sprintf("does not divide the gang's %d members", n)))
			continue
		}
		if s.MinCount < 0 || s.MinCount > n/s.Size {
			errs = append(errs, field.Invalid(path.Child("minCount"), s.MinCount, fmt.Sprintf("must be between 1 and the %d segments of %d members", n/s.Size, n)))
		}
	}
	return errs
}
