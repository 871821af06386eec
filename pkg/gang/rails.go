package gang

import (
	"fmt"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// RailAlignment is how a gang's members use the rails of a rail-optimized
// fabric (scheduling.AnnotationRailAlignment).
type RailAlignment string

// RailAlignmentOf reads the gang's rail alignment: preferred when the
// annotation is absent, an error naming the annotation and its values when
// it holds something else.
func RailAlignmentOf(spec *Spec) (RailAlignment, error) {
	v, ok := spec.Annotations[scheduling.AnnotationRailAlignment]
	if !ok {
		return scheduling.RailAlignmentPreferred, nil
	}
	switch v {
	case scheduling.RailAlignmentRequired, scheduling.RailAlignmentPreferred, scheduling.RailAlignmentNone:
		return RailAlignment(v), nil
	}
	return "", fmt.Errorf("annotation %s=%q is not one of %q, %q or %q", scheduling.AnnotationRailAlignment, v,
		scheduling.RailAlignmentRequired, scheduling.RailAlignmentPreferred, scheduling.RailAlignmentNone)
}
