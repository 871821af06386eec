package workload

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/internal/parallel"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// Submitter creates jobs' objects at their arrival times.
type Submitter struct {
	// Kube creates pods and native PodGroups.
	Kube kubernetes.Interface
	// Groups creates gpu-gang's PodGroups; it must speak JSON.
	Groups pgclientset.Interface
	// Builder makes the objects.
	Builder *Builder
	// Jobs is how many jobs are created at once; arrivals that find every
	// worker busy wait, and their submission time is when creation starts.
	Jobs int
	// PodsPerJob is how many of one job's pods are created at once.
	PodsPerJob int
	// OnSubmit is called just before a job's first object is created.
	OnSubmit func(job string, at time.Time)
}

// Run submits jobs, each at start + its arrival time, and returns when all
// are created or the first creation fails.
func (s *Submitter) Run(ctx context.Context, start time.Time, jobs []scenario.Job) error {
	// Objects are built before the clock starts, so that building them is
	// not part of any job's latency.
	objs := make([]*Objects, len(jobs))
	for i := range jobs {
		o, err := s.Builder.Build(&jobs[i])
		if err != nil {
			return err
		}
		objs[i] = o
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	queue := make(chan int)
	errs := make(chan error, 1)
	go func() {
		errs <- parallel.Do(ctx, len(jobs), s.Jobs, func(ctx context.Context, _ int) error {
			select {
			case i := <-queue:
				return s.create(ctx, jobs[i].Name, objs[i])
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
	}()
	for i := range jobs {
		if wait := time.Until(start.Add(jobs[i].At)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		select {
		case queue <- i:
		case err := <-errs:
			if err == nil {
				err = fmt.Errorf("submitter stopped early")
			}
			return err
		}
	}
	return <-errs
}

func (s *Submitter) create(ctx context.Context, job string, o *Objects) error {
	if s.OnSubmit != nil {
		s.OnSubmit(job, time.Now())
	}
	ns := s.Builder.Namespace
	if t := o.ClaimTemplate; t != nil {
		if _, err := s.Kube.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, t, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ResourceClaimTemplate %s: %w", t.Name, err)
		}
	}
	switch {
	case o.GangGroup != nil:
		if _, err := s.Groups.SchedulingV1alpha1().PodGroups(ns).Create(ctx, o.GangGroup, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating PodGroup %s: %w", job, err)
		}
	case o.NativeGroup != nil:
		if _, err := s.Kube.SchedulingV1beta1().PodGroups(ns).Create(ctx, o.NativeGroup, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating PodGroup %s: %w", job, err)
		}
	case o.Composite != nil:
		if _, err := s.Kube.SchedulingV1alpha3().CompositePodGroups(ns).Create(ctx, o.Composite, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating CompositePodGroup %s: %w", job, err)
		}
		for _, pg := range o.SegmentGroups {
			if _, err := s.Kube.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating PodGroup %s of CompositePodGroup %s: %w", pg.Name, job, err)
			}
		}
	}
	return parallel.Do(ctx, len(o.Pods), s.PodsPerJob, func(ctx context.Context, i int) error {
		if _, err := s.Kube.CoreV1().Pods(ns).Create(ctx, o.Pods[i], metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s: %w", o.Pods[i].Name, err)
		}
		return nil
	})
}
