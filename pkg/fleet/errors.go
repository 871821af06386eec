package fleet

import (
	"fmt"
	"unicode/utf8"
)

// LabelError says that a node label holds a value gpu-gang cannot read. The
// label is then ignored, as if it were missing; the plugin turns the error
// into an Event on the node so that whoever writes the label can fix it.
type LabelError struct {
	// Label is the label key.
	Label string
	// Value is the label's value.
	Value string
	// Reason says what is wrong with it.
	Reason string
	// Want describes the accepted values.
	Want string
}

func (e *LabelError) Error() string {
	return fmt.Sprintf("label %s=%s %s; want %s", e.Label, quote(e.Value), e.Reason, e.Want)
}

// AnnotationError says that a gang's annotation holds a value gpu-gang
// cannot read. It names the annotation, not the object: the caller knows
// which PodGroup or pod it read (see OnPod) and names it in the Event.
type AnnotationError struct {
	// Annotation is the annotation key.
	Annotation string
	// Value is the annotation's value.
	Value string
	// OnPod is true when the value came from the pod, false when from its
	// PodGroup.
	OnPod bool
	// Reason says what is wrong with the value.
	Reason string
	// Want describes the accepted values.
	Want string
}

func (e *AnnotationError) Error() string {
	return fmt.Sprintf("annotation %s=%s %s; want %s", e.Annotation, quote(e.Value), e.Reason, e.Want)
}

// maxQuoted bounds how much of a value an error repeats: annotations may
// be large, and an Event message is not the place to echo them whole.
const maxQuoted = 80

// quote renders a value for an error message: quoted, so that spaces and
// control characters show, and cut short when long.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return fmt.Sprintf("%q", s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:cut], len(s))
}
