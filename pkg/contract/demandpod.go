package contract

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// DemandPodStateKey is where a caller that runs the profile's PreFilter
// plugins for a stand-in of a pod leaves, in the stand-in's CycleState, the
// pod whose GPU demand the stand-in carries.
//
// Writer: the gang plugin. It runs PreFilter for a copy of a member without
// the ResourceClaims and DRA-served extended resources whose devices its
// own capacity model counts, so that DynamicResources does not build its
// allocator over every slice once more. Reader: GPUFleet's PreFilter. GPU
// rules still bind the copy: its GPU demand is the member's, read off the
// member (WithDemandPod, DemandPod). Clone shares the state: nothing writes
// it after it is written.
const DemandPodStateKey fwk.StateKey = "gpu-gang.x-k8s.io/fleet-demand-pod"

// demandPod is the state under DemandPodStateKey. Nothing writes it after
// it is written, so Clone shares it.
type demandPod struct{ pod *v1.Pod }

func (d *demandPod) Clone() fwk.StateData { return d }

// WithDemandPod records in cs that the pod PreFilter runs for stands in for
// pod, whose GPU demand it carries.
func WithDemandPod(cs fwk.CycleState, pod *v1.Pod) {
	cs.Write(DemandPodStateKey, &demandPod{pod: pod})
}

// DemandPod returns the pod whose GPU demand pod carries in cs: the pod
// recorded with WithDemandPod when it is the same pod (the same UID), pod
// itself otherwise. A cycle that runs for the pod itself, not a stand-in,
// records nothing, so nothing recorded is not an error.
func DemandPod(cs fwk.CycleState, pod *v1.Pod) *v1.Pod {
	recorded, err := readDemandPod(cs)
	if err != nil || recorded == nil || recorded.UID != pod.UID {
		return pod
	}
	return recorded
}

func readDemandPod(cs fwk.CycleState) (*v1.Pod, error) {
	data, err := cs.Read(DemandPodStateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from cycle state: %w", DemandPodStateKey, err)
	}
	d, ok := data.(*demandPod)
	if !ok {
		return nil, fmt.Errorf("%q in cycle state has type %T", DemandPodStateKey, data)
	}
	return d.pod, nil
}
