package gpufleet

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/dedupevents"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Event reasons.
const (
	// ReasonInvalidGPURequirements: a PodGroup's or a pod's
	// gpu-gang.x-k8s.io/ annotation cannot be read; the pod waits until it
	// is fixed.
	ReasonInvalidGPURequirements = "InvalidGPURequirements"
	// ReasonInvalidGPULabel: a node label that GPU feature discovery or a
	// provisioner writes holds a value gpu-gang cannot read; the label is
	// ignored as if it were missing.
	ReasonInvalidGPULabel = "InvalidGPULabel"
	// ReasonInvalidGPUDeviceAttribute: an attribute of a device that
	// NVIDIA's GPU DRA driver publishes for a node holds a value gpu-gang
	// cannot read; the attribute is ignored as if it were missing.
	ReasonInvalidGPUDeviceAttribute = "InvalidGPUDeviceAttribute"
)

// Status messages people read in pod conditions.
const (
	// ErrReasonInvalidRequirements prefixes the status of a pod whose GPU
	// requirement annotations cannot be read.
	ErrReasonInvalidRequirements = "invalid GPU requirements"
)

// eventRecorder records each distinct note once per object and reason (see
// pkg/dedupevents): PreFilter runs on every retry, and one Event saying what
// is wrong is what a person needs.
type eventRecorder struct {
	*dedupevents.Recorder
}

func newEventRecorder(r events.EventRecorder, c clock.PassiveClock) *eventRecorder {
	return &eventRecorder{dedupevents.New(r, c)}
}

// record records a Warning regarding an object.
func (er *eventRecorder) record(regarding runtime.Object, key, reason, note string) {
	er.Record(key+"/"+reason, regarding, nil, v1.EventTypeWarning, reason, note)
}

// reportRequirements records an Event for each unreadable annotation, on
// the object that holds it, and returns the status message.
func (pl *Plugin) reportRequirements(pod *v1.Pod, group *gang.Spec, err error) string {
	var errs []error
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	} else {
		errs = []error{err}
	}
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		var ae *fleet.AnnotationError
		if !errors.As(e, &ae) || ae.OnPod || group == nil {
			note := fmt.Sprintf("pod %s/%s: %v; fix or remove the annotation", pod.Namespace, pod.Name, e)
			pl.events.record(pod, "pod/"+string(pod.UID)+"/"+annotationOf(ae), ReasonInvalidGPURequirements, note)
			parts = append(parts, fmt.Sprintf("pod %s: %v", pod.Name, e))
			continue
		}
		note := fmt.Sprintf("PodGroup %s: %v; fix or remove the annotation: no GPU member of the gang schedules until then", group.Key, e)
		pl.events.record(group.Ref, "podgroup/"+string(group.UID)+"/"+ae.Annotation, ReasonInvalidGPURequirements, note)
		parts = append(parts, fmt.Sprintf("PodGroup %s: %v", group.Key, e))
	}
	return ErrReasonInvalidRequirements + ": " + strings.Join(parts, "; ")
}

func annotationOf(ae *fleet.AnnotationError) string {
	if ae == nil {
		return ""
	}
	return ae.Annotation
}

// reportProblems records that labels, or attributes of devices, of a node
// could not be read, each in an Event on the node. The node cache calls it
// when it reads a node's labels or devices anew, so each problem is
// recorded once per change of them.
func (pl *Plugin) reportProblems(node string, f *fleet.NodeFacts) {
	ref := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	for _, p := range f.Problems {
		pl.events.record(ref, "node/"+node+"/"+p.Label, ReasonInvalidGPULabel,
			fmt.Sprintf("node %s: %v; gpu-gang ignores the label until it is fixed", node, p))
	}
	if f.Devices == nil {
		return
	}
	for _, p := range f.Devices.Problems {
		pl.events.record(ref, "node/"+node+"/"+p.Pool+"/"+p.Device+"/"+p.Attribute, ReasonInvalidGPUDeviceAttribute,
			fmt.Sprintf("node %s: %s: attribute %s=%s %s; want %s. gpu-gang ignores the attribute until it is fixed; "+
				"the DRA driver %s publishes it for the node, so the fix is in the driver or its configuration",
				node, pl.describeDevice(p), p.Attribute, p.Value, p.Reason, p.Want, p.Driver))
	}
}
