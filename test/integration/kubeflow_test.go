package integration

// Tests with the real Kubeflow training-operator (v1.8, pinned in
// hack/tools/training-operator): it creates the PodGroup and the pods of a
// PyTorchJob, gpu-gang schedules them, kwok runs and completes them, and
// gpu-gang's PodGroup controller reports the group's phases.

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	upstream "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/controller/podgroup"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/lifecycle"
)

const (
	// operatorTimeout bounds the wait for the training-operator to act on
	// a new job: the first job also waits for the operator to start.
	operatorTimeout = 2 * time.Minute
	// jobRunFor is how long kwok keeps each pod of a test job Running.
	jobRunFor = 3 * time.Second
	// jobDoneTimeout bounds the wait for a job's pods to run and finish,
	// and for the operator and the controller to report it.
	jobDoneTimeout = 2 * time.Minute
	// holdFinalizer keeps a test's PodGroup from going away before the test
	// has seen its last phase: the operator deletes it once the job is done.
	holdFinalizer = "integration.gpu-gang.x-k8s.io/hold"
)

var pytorchJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}

// pytorchJob is a PyTorchJob with one master and the given workers, each
// pod asking for gpus GPUs and running for runFor under kwok. The pods name
// gpu-gang as their scheduler, as the examples do; the operator's
// --gang-scheduler-name would set it too.
func pytorchJob(name string, workers, gpus int, runFor time.Duration) *unstructured.Unstructured {
	replica := func(n int) map[string]any {
		res := map[string]any{"nvidia.com/gpu": fmt.Sprint(gpus), "cpu": "1", "memory": "1Gi"}
		return map[string]any{
			"replicas":      int64(n),
			"restartPolicy": "OnFailure",
			"template": map[string]any{
				"metadata": map[string]any{
					"annotations": map[string]any{lifecycle.RunForAnnotation: runFor.String()},
				},
				"spec": map[string]any{
					"schedulerName":                 schedulerName,
					"terminationGracePeriodSeconds": int64(0),
					"containers": []any{map[string]any{
						"name":      "pytorch",
						"image":     "docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
						"command":   []any{"torchrun", "train.py"},
						"resources": map[string]any{"requests": res, "limits": res},
					}},
				},
			},
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1",
		"kind":       "PyTorchJob",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"pytorchReplicaSpecs": map[string]any{
				"Master": replica(1),
				"Worker": replica(workers),
			},
		},
	}}
}

func jobClient(env *testEnv) dynamic.ResourceInterface {
	env.t.Helper()
	dyn, err := dynamic.NewForConfig(controlPlane.JSONConfig())
	if err != nil {
		env.t.Fatal(err)
	}
	return dyn.Resource(pytorchJobs).Namespace(env.ns)
}

// createJobs creates PyTorchJobs and, when the test ends, deletes them (the
// operator has stopped by then, so it recreates nothing).
func (env *testEnv) createJobs(jobs ...*unstructured.Unstructured) {
	env.t.Helper()
	client := jobClient(env)
	for _, j := range jobs {
		if _, err := client.Create(env.t.Context(), j, metav1.CreateOptions{}); err != nil {
			env.t.Fatalf("creating PyTorchJob %s: %v", j.GetName(), err)
		}
	}
	env.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := client.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			env.t.Errorf("deleting PyTorchJobs: %v", err)
		}
	})
}

// holdPodGroup waits until the operator has created PodGroup name, with
// minMember want, and adds holdFinalizer to it, removed when the test ends.
func (env *testEnv) holdPodGroup(op *trainingOperator, name string, want int32) {
	env.t.Helper()
	pgs := pgClient.SchedulingV1alpha1().PodGroups(env.ns)
	var pg *upstream.PodGroup
	err := waitFor(env.t.Context(), operatorTimeout, func(ctx context.Context) (bool, error) {
		if exited, err := op.exited(); exited {
			return false, fmt.Errorf("the training-operator exited: %v", err)
		}
		var err error
		pg, err = pgs.Get(ctx, name, metav1.GetOptions{})
		return err == nil, client404(err)
	})
	if err != nil {
		env.t.Fatalf("waiting %s for the training-operator to create PodGroup %s: %v", operatorTimeout, name, err)
	}
	if pg.Spec.MinMember != want {
		env.t.Errorf("the operator's PodGroup %s has minMember %d, want %d", name, pg.Spec.MinMember, want)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"finalizers":[%q]}}`, holdFinalizer)
	if _, err := pgs.Patch(env.t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		env.t.Fatalf("holding PodGroup %s: %v", name, err)
	}
	env.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		_, err := pgs.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			env.t.Errorf("releasing PodGroup %s: %v", name, err)
		}
	})
}

// client404 lets a wait go on while an object does not exist yet.
func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// jobPods waits until the operator has created n pods of job name, and
// returns them.
func (env *testEnv) jobPods(op *trainingOperator, name string, n int) []*v1.Pod {
	env.t.Helper()
	var pods []*v1.Pod
	err := waitFor(env.t.Context(), operatorTimeout, func(ctx context.Context) (bool, error) {
		if exited, err := op.exited(); exited {
			return false, fmt.Errorf("the training-operator exited: %v", err)
		}
		list, err := kubeClient.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{LabelSelector: scheduling.PodGroupLabel + "=" + name})
		if err != nil {
			return false, err
		}
		pods = pods[:0]
		for i := range list.Items {
			pods = append(pods, &list.Items[i])
		}
		return len(pods) == n, nil
	})
	if err != nil {
		env.t.Fatalf("waiting %s for the training-operator to create %d pods of %s: %v; have %d", operatorTimeout, n, name, err, len(pods))
	}
	for _, p := range pods {
		if p.Spec.SchedulerName != schedulerName {
			env.t.Errorf("pod %s names scheduler %q, want %q", p.Name, p.Spec.SchedulerName, schedulerName)
		}
	}
	return pods
}

// waitForJobSucceeded waits until the operator reports PyTorchJob name
// Succeeded.
func (env *testEnv) waitForJobSucceeded(name string) {
	env.t.Helper()
	client := jobClient(env)
	var conds []any
	err := waitFor(env.t.Context(), jobDoneTimeout, func(ctx context.Context) (bool, error) {
		job, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ = unstructured.NestedSlice(job.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Succeeded" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		env.t.Fatalf("waiting %s for PyTorchJob %s to succeed: %v; conditions: %v", jobDoneTimeout, name, err, conds)
	}
}

// exampleJob reads the PyTorchJob of manifests/examples/pytorchjob.yaml and
// gives each of its pods a run time under kwok.
func exampleJob(t *testing.T, runFor time.Duration) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(pytorchJobExample)
	if err != nil {
		t.Fatal(err)
	}
	job := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &job.Object); err != nil {
		t.Fatalf("%s: %v", pytorchJobExample, err)
	}
	specs, _, err := unstructured.NestedMap(job.Object, "spec", "pytorchReplicaSpecs")
	if err != nil || len(specs) == 0 {
		t.Fatalf("%s has no pytorchReplicaSpecs: %v", pytorchJobExample, err)
	}
	for name := range specs {
		path := []string{"spec", "pytorchReplicaSpecs", name, "template", "metadata", "annotations"}
		if err := unstructured.SetNestedField(job.Object, runFor.String(), append(path, lifecycle.RunForAnnotation)...); err != nil {
			t.Fatal(err)
		}
	}
	return job
}

// pytorchJobExample is relative to this package's directory.
const pytorchJobExample = "../../manifests/examples/pytorchjob.yaml"

// The PyTorchJob of manifests/examples, one master and three workers with 8
// GPUs each, on four free 8-GPU nodes: the operator's PodGroup gets all four
// pods bound together, goes Running and then Finished, and the job
// succeeds.
func TestPyTorchJobRunsAsOneGang(t *testing.T) {
	env := newTestEnv(t)
	env.kwokNodes(4, 8)
	// The operator first: without its binary the test skips before it
	// starts anything else.
	op := startTrainingOperator(t)
	startKwok(t)
	startPodGroupController(t, podgroup.DefaultMissingMembersGrace)
	job := exampleJob(t, jobRunFor)
	name := job.GetName()
	gangs := env.watchGangs(map[string]int{name: 4})
	phases := env.recordPodGroupPhases()

	env.createJobs(job)
	env.holdPodGroup(op, name, 4)
	pods := env.jobPods(op, name, 4)
	nodes := env.waitForBound(bindTimeout, pods...)
	if used := sets.New(mapValues(nodes)...); used.Len() != 4 {
		t.Errorf("members share nodes: %v", nodes)
	}

	phases.waitFor(t, jobDoneTimeout, name, upstream.PodGroupRunning, upstream.PodGroupFinished)
	env.waitForJobSucceeded(name)
	gangs.expectNeverPartial()

	env.waitForEvent("PodGroup", name, coscheduling.ReasonGangScheduled)
	env.waitForEvent("PodGroup", name, podgroup.EventGangRunning)
	env.waitForEvent("PodGroup", name, podgroup.EventGangFinished)
	pg := env.getPodGroup(name)
	if pg.Status.Succeeded != 4 || pg.Status.Running != 0 || pg.Status.Failed != 0 {
		t.Errorf("finished PodGroup counts: running %d, succeeded %d, failed %d; want 0, 4, 0",
			pg.Status.Running, pg.Status.Succeeded, pg.Status.Failed)
	}
	env.expectCondition(pg, podgroup.ConditionScheduled, metav1.ConditionTrue, podgroup.ReasonQuorumScheduled)
	t.Logf("PodGroup %s went through %v", name, phases.of(name))
}

// Two PyTorchJobs that cannot both fit, submitted together: neither is ever
// part-bound, and the second binds only after every pod of the first has
// finished.
func TestPyTorchJobsThatCannotBothFitRunOneAfterTheOther(t *testing.T) {
	env := newTestEnv(t)
	env.kwokNodes(4, 8)
	// The operator first: without its binary the test skips before it
	// starts anything else.
	op := startTrainingOperator(t)
	startKwok(t)
	startPodGroupController(t, podgroup.DefaultMissingMembersGrace)
	gangs := env.watchGangs(map[string]int{"first": 4, "second": 4})
	phases := env.recordPodGroupPhases()
	timeline := env.recordPodTimeline()

	env.createJobs(pytorchJob("first", 3, 8, jobRunFor), pytorchJob("second", 3, 8, jobRunFor))
	env.holdPodGroup(op, "first", 4)
	env.holdPodGroup(op, "second", 4)
	env.jobPods(op, "first", 4)
	env.jobPods(op, "second", 4)

	// Whichever gang the scheduler takes first is "the first" here.
	var earlier, later string
	err := waitFor(t.Context(), bindTimeout, func(context.Context) (bool, error) {
		g := timeline.gangs()
		switch {
		case g["first"].bound == 4:
			earlier, later = "first", "second"
		case g["second"].bound == 4:
			earlier, later = "second", "first"
		}
		return earlier != "", nil
	})
	if err != nil {
		t.Fatalf("waiting %s for either gang to bind: %v; gangs: %+v", bindTimeout, err, timeline.gangs())
	}
	t.Logf("gang %s bound first", earlier)

	for _, name := range []string{earlier, later} {
		phases.waitFor(t, jobDoneTimeout, name, upstream.PodGroupRunning, upstream.PodGroupFinished)
		env.waitForJobSucceeded(name)
	}
	gangs.expectNeverPartial()

	g := timeline.gangs()
	first, second := g[earlier], g[later]
	if first.succeeded != 4 || second.succeeded != 4 {
		t.Fatalf("succeeded pods: %s %d, %s %d; want 4 each", earlier, first.succeeded, later, second.succeeded)
	}
	// Each gang needs all four nodes, so the later one can bind only once
	// the earlier one has finished: its first bind comes after the earlier
	// gang's last success in the watch, which delivers etcd's order.
	if second.firstBound < first.lastSucceeded {
		t.Errorf("gang %s started binding (event %d) before gang %s finished (event %d)",
			later, second.firstBound, earlier, first.lastSucceeded)
	}
	t.Logf("phases: %s %v, %s %v", earlier, phases.of(earlier), later, phases.of(later))
}
