package gang

import (
	"fmt"
	"strconv"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// MovableOf reads whether the gang may be moved (scheduling.AnnotationMovable):
// false when the annotation is absent, an error naming the annotation when
// it is not a boolean.
func MovableOf(spec *Spec) (bool, error) {
	v, ok := spec.Annotations[scheduling.AnnotationMovable]
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("annotation %s=%q is not \"true\" or \"false\"", scheduling.AnnotationMovable, v)
	}
	return b, nil
}
