package workload

import (
	"fmt"
	"strconv"

	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// SegmentLabel numbers, from 0, the segment a member of a segmented job
// belongs to, in every flavor; metrics group members into segments by it.
const SegmentLabel = "simulator.gpu-gang.x-k8s.io/segment"

// Workload references on a composite's objects. The API requires one on a
// CompositePodGroup and on a PodGroup that names a parent; no Workload
// object is created, as a controller that made the groups from a Workload
// would have, because no scheduler reads it.
const (
	compositeTemplate = "job"
	segmentTemplate   = "segment"
)

// labelSegments puts every member of a segmented job in its segment.
func labelSegments(job *scenario.Job, o *Objects) {
	for i, p := range o.Pods {
		p.Labels[SegmentLabel] = strconv.Itoa(job.SegmentOf(i))
	}
}

// gangPluginSegments states a segmented job's hierarchy for gpu-gang's
// PodGroup: the quorum in whole segments, and the segments as the
// PodGroup's annotations or, with Kueue set, as Kueue's pod-template
// annotations, where the gang's own level then goes too (gpu-gang reads
// Kueue's from the first member only when the PodGroup sets none).
func (b *Builder) gangPluginSegments(job *scenario.Job, o *Objects) error {
	seg := job.Segments
	key, err := b.tierKey(job, &scenario.Topology{Level: seg.Level})
	if err != nil {
		return err
	}
	pg := o.GangGroup
	pg.Spec.MinMember = int32(job.Quorum())
	if !seg.Kueue {
		if pg.Annotations == nil {
			pg.Annotations = map[string]string{}
		}
		pg.Annotations[scheduling.AnnotationSegmentSize] = strconv.Itoa(seg.Size)
		pg.Annotations[scheduling.AnnotationSegmentTopologyRequired] = key
		return nil
	}
	podAnnotations := map[string]string{
		scheduling.KueueSliceSizeAnnotation:             strconv.Itoa(seg.Size),
		scheduling.KueueSliceRequiredTopologyAnnotation: key,
	}
	for _, k := range []string{scheduling.AnnotationTopologyRequired, scheduling.AnnotationTopologyPreferred} {
		level, ok := pg.Annotations[k]
		if !ok {
			continue
		}
		delete(pg.Annotations, k)
		kueueKey := scheduling.KueuePreferredTopologyAnnotation
		if k == scheduling.AnnotationTopologyRequired {
			kueueKey = scheduling.KueueRequiredTopologyAnnotation
		}
		podAnnotations[kueueKey] = level
	}
	for _, p := range o.Pods {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for k, v := range podAnnotations {
			p.Annotations[k] = v
		}
	}
	return nil
}

// composite states a segmented job's hierarchy in Kubernetes' own API: a
// CompositePodGroup named after the job, whose gang policy needs
// Segments.Min children and whose topology is the job's required level,
// and under it one PodGroup per segment (<job>-s<index>) that needs all its
// members inside one domain of the segment level; each member names its
// segment's PodGroup. Both go whole when preempted, as the job's single
// PodGroup does without segments.
func (b *Builder) composite(job *scenario.Job, o *Objects) error {
	seg := job.Segments
	segKey, err := b.tierKey(job, &scenario.Topology{Level: seg.Level})
	if err != nil {
		return err
	}
	cpg := &schedulingv1alpha3.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: b.Namespace, Labels: map[string]string{JobLabel: job.Name}},
		Spec: schedulingv1alpha3.CompositePodGroupSpec{
			WorkloadRef: &schedulingv1alpha3.WorkloadReference{WorkloadName: job.Name, TemplateName: compositeTemplate},
			SchedulingPolicy: schedulingv1alpha3.CompositePodGroupSchedulingPolicy{
				Gang: &schedulingv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: int32(seg.Min(job.Pods))},
			},
			PriorityClassName: PriorityClassName(job.Priority),
			DisruptionMode:    &schedulingv1alpha3.CompositeDisruptionMode{All: &schedulingv1alpha3.AllCompositeDisruptionMode{}},
		},
	}
	if t := job.Topology; t != nil && t.Required {
		key, err := b.tierKey(job, t)
		if err != nil {
			return err
		}
		cpg.Spec.SchedulingConstraints = &schedulingv1alpha3.CompositePodGroupSchedulingConstraints{
			Topology: []schedulingv1alpha3.TopologyConstraint{{Key: key}},
		}
	}
	o.Composite = cpg
	o.NativeGroup = nil
	for s := range seg.Count(job.Pods) {
		name := fmt.Sprintf("%s-s%d", job.Name, s)
		o.SegmentGroups = append(o.SegmentGroups, &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.Namespace, Labels: map[string]string{JobLabel: job.Name}},
			Spec: schedulingv1beta1.PodGroupSpec{
				ParentCompositePodGroupName: ptr.To(job.Name),
				WorkloadRef:                 &schedulingv1beta1.WorkloadReference{WorkloadName: job.Name, TemplateName: segmentTemplate},
				SchedulingPolicy:            schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(seg.Size)}},
				SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{
					Topology: []schedulingv1beta1.TopologyConstraint{{Key: segKey}},
				},
				PriorityClassName: PriorityClassName(job.Priority),
				DisruptionMode:    &schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}},
			},
		})
	}
	for i, p := range o.Pods {
		p.Spec.SchedulingGroup.PodGroupName = ptr.To(fmt.Sprintf("%s-s%d", job.Name, job.SegmentOf(i)))
	}
	return nil
}
