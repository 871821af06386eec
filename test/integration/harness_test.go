package integration

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Named timeouts. The machine running these tests may be slow and shared, so
// positive waits are generous: they cost time only when a test fails.
const (
	// bindTimeout bounds the wait for pods that should bind now.
	bindTimeout = 30 * time.Second
	// retryBindTimeout bounds the wait for pods that bind only after a gang
	// timed out or backed off and tried again.
	retryBindTimeout = 90 * time.Second
	// eventTimeout bounds the wait for an Event the scheduler should record.
	eventTimeout = 30 * time.Second
	// staysUnboundWindow is how long a negative check watches pods that
	// must not bind: long enough for several scheduling attempts.
	staysUnboundWindow = 5 * time.Second
	// cleanupTimeout bounds each test's deletion of its objects.
	cleanupTimeout = time.Minute
	// pollInterval is how often waits look again.
	pollInterval = 100 * time.Millisecond
)

// gpu is the extended resource the tests' nodes offer.
const gpu v1.ResourceName = "nvidia.com/gpu"

// testEnv is one test's view of the shared cluster: its namespace and the
// nodes it created, deleted again when the test ends.
type testEnv struct {
	t  *testing.T
	ns string
}

var namespaceCount atomic.Int64

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// newTestEnv creates a namespace for t and registers the cleanup that deletes
// t's pods, PodGroups and nodes, after logging the namespace's pods and
// Events if t failed.
func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	name := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 40 {
		name = strings.TrimRight(name[:40], "-")
	}
	env := &testEnv{t: t, ns: fmt.Sprintf("%s-%d", name, namespaceCount.Add(1))}
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: env.ns}}
	if _, err := kubeClient.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", env.ns, err)
	}
	t.Cleanup(env.cleanup)
	return env
}

// cleanup runs after t.Context() is canceled, so it uses its own context.
func (env *testEnv) cleanup() {
	t := env.t
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if t.Failed() {
		env.dumpState(ctx)
	}
	// No kubelet runs, so a bound pod deleted gracefully would wait for
	// one forever: delete at once.
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	if err := kubeClient.CoreV1().Pods(env.ns).DeleteCollection(ctx, now, metav1.ListOptions{}); err != nil {
		t.Errorf("deleting pods in %s: %v", env.ns, err)
	}
	if err := pgClient.SchedulingV1alpha1().PodGroups(env.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Errorf("deleting PodGroups in %s: %v", env.ns, err)
	}
	if err := kubeClient.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: testNodeLabel + "=" + env.ns}); err != nil {
		t.Errorf("deleting nodes of %s: %v", env.ns, err)
	}
	// The next test must start from an empty cluster.
	err := waitFor(ctx, cleanupTimeout, func(ctx context.Context) (bool, error) {
		pods, err := kubeClient.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		nodes, err := kubeClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: testNodeLabel + "=" + env.ns})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0 && len(nodes.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("waiting for the pods and nodes of %s to go: %v", env.ns, err)
	}
	// Namespace deletion needs the namespace controller, which does not
	// run here; an emptied namespace left behind costs nothing.
}

// dumpState logs where the namespace's pods are and its Events, to explain a
// failure.
func (env *testEnv) dumpState(ctx context.Context) {
	t := env.t
	pods, err := kubeClient.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		var why string
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status != v1.ConditionTrue {
				why = c.Reason + ": " + c.Message
			}
		}
		t.Logf("pod %s gang=%q node=%q gates=%d %s", p.Name, p.Labels[scheduling.PodGroupLabel], p.Spec.NodeName, len(p.Spec.SchedulingGates), why)
	}
	events, err := kubeClient.EventsV1().Events(env.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing events: %v", err)
		return
	}
	sort.Slice(events.Items, func(i, j int) bool { return eventTime(&events.Items[i]).Before(eventTime(&events.Items[j])) })
	for _, e := range events.Items {
		t.Logf("event %s %s/%s %s: %s", e.Type, e.Regarding.Kind, e.Regarding.Name, e.Reason, e.Note)
	}
}

func eventTime(e *eventsv1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.DeprecatedLastTimestamp.Time
}

// testNodeLabel marks the nodes a test created with the test's namespace.
const testNodeLabel = "integration.gpu-gang.x-k8s.io/test"

// gpuNode starts a node with the given number of GPUs and room for any
// test's CPU and memory requests. Create it with createNodes.
func gpuNode(name string, gpus int) *st.NodeWrapper {
	return st.MakeNode().Name(name).Label(v1.LabelHostname, name).Capacity(map[v1.ResourceName]string{
		gpu:               fmt.Sprint(gpus),
		v1.ResourceCPU:    "96",
		v1.ResourceMemory: "1Ti",
		v1.ResourcePods:   "110",
	})
}

// nodeName is the name env gives the node it creates from name; node names
// are cluster-wide, so they carry the namespace.
func (env *testEnv) nodeName(name string) string { return env.ns + "-" + name }

// createNodes creates nodes through the API and sets their status: capacity,
// allocatable and a Ready condition. No kubelet runs, so the nodes stay as
// created. Node names get the namespace as a prefix (see nodeName).
func (env *testEnv) createNodes(nodes ...*v1.Node) []*v1.Node {
	env.t.Helper()
	ctx := env.t.Context()
	var out []*v1.Node
	for _, n := range nodes {
		n = n.DeepCopy()
		n.Name = env.nodeName(n.Name)
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[v1.LabelHostname] = n.Name
		n.Labels[testNodeLabel] = env.ns
		status := n.Status
		if len(status.Conditions) == 0 {
			status.Conditions = []v1.NodeCondition{{
				Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
			}}
		}
		created, err := kubeClient.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			env.t.Fatalf("creating node %s: %v", n.Name, err)
		}
		// kwok may write a node it manages at once; set the status on
		// whatever version is current.
		var updated *v1.Node
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			created.Status = status
			updated, err = kubeClient.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				if latest, getErr := kubeClient.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); getErr == nil {
					created = latest
				}
			}
			return err
		})
		if err != nil {
			env.t.Fatalf("setting the status of node %s: %v", n.Name, err)
		}
		out = append(out, updated)
	}
	return out
}

// gpuNodes creates count nodes named n0, n1, ... with gpus GPUs each.
func (env *testEnv) gpuNodes(count, gpus int) []*v1.Node {
	env.t.Helper()
	nodes := make([]*v1.Node, count)
	for i := range nodes {
		nodes[i] = gpuNode(fmt.Sprintf("n%d", i), gpus).Obj()
	}
	return env.createNodes(nodes...)
}

// pod starts a pod in env's namespace for gpu-gang's scheduler, outside any
// gang.
func (env *testEnv) pod(name string) *st.PodWrapper {
	return st.MakePod().Namespace(env.ns).Name(name).SchedulerName(schedulerName).ZeroTerminationGracePeriod()
}

// gangPod starts a member of the gang named group.
func (env *testEnv) gangPod(name, group string) *st.PodWrapper {
	return env.pod(name).Label(scheduling.PodGroupLabel, group)
}

// gangPods builds count members of group named <group>-0, <group>-1, ...,
// each requesting gpus GPUs and one CPU.
func (env *testEnv) gangPods(group string, count, gpus int) []*v1.Pod {
	pods := make([]*v1.Pod, count)
	for i := range pods {
		pods[i] = env.gangPod(fmt.Sprintf("%s-%d", group, i), group).
			Res(gpuRequest(gpus)).Obj()
	}
	return pods
}

// gpuRequest is a container's requests (and limits, as extended resources
// require) for gpus GPUs and one CPU.
func gpuRequest(gpus int) map[v1.ResourceName]string {
	return map[v1.ResourceName]string{gpu: fmt.Sprint(gpus), v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}
}

func (env *testEnv) createPods(pods ...*v1.Pod) {
	env.t.Helper()
	for _, p := range pods {
		if _, err := kubeClient.CoreV1().Pods(env.ns).Create(env.t.Context(), p, metav1.CreateOptions{}); err != nil {
			env.t.Fatalf("creating pod %s: %v", p.Name, err)
		}
	}
}

func (env *testEnv) deletePods(pods ...*v1.Pod) {
	env.t.Helper()
	for _, p := range pods {
		err := kubeClient.CoreV1().Pods(env.ns).Delete(env.t.Context(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			env.t.Fatalf("deleting pod %s: %v", p.Name, err)
		}
	}
}

func (env *testEnv) createPodGroup(pg *v1alpha1.PodGroup) *v1alpha1.PodGroup {
	env.t.Helper()
	pg = pg.DeepCopy()
	// The builder fills in a UID and a creation time for unit tests; the
	// API server assigns its own.
	pg.UID = ""
	pg.CreationTimestamp = metav1.Time{}
	created, err := pgClient.SchedulingV1alpha1().PodGroups(env.ns).Create(env.t.Context(), pg, metav1.CreateOptions{})
	if err != nil {
		env.t.Fatalf("creating PodGroup %s: %v", pg.Name, err)
	}
	return created
}

// boundNodes returns, for each named pod, the node it is bound to or "".
func (env *testEnv) boundNodes(ctx context.Context, names []string) (map[string]string, error) {
	list, err := kubeClient.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	byName := map[string]string{}
	for _, p := range list.Items {
		byName[p.Name] = p.Spec.NodeName
	}
	out := map[string]string{}
	for _, n := range names {
		node, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("pod %s does not exist", n)
		}
		out[n] = node
	}
	return out, nil
}

func podNames(pods []*v1.Pod) []string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return names
}

// waitForBound waits up to timeout until every pod is bound to a node, and
// returns the node of each.
func (env *testEnv) waitForBound(timeout time.Duration, pods ...*v1.Pod) map[string]string {
	env.t.Helper()
	names := podNames(pods)
	var last map[string]string
	err := waitFor(env.t.Context(), timeout, func(ctx context.Context) (bool, error) {
		nodes, err := env.boundNodes(ctx, names)
		if err != nil {
			return false, err
		}
		last = nodes
		for _, n := range nodes {
			if n == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		env.t.Fatalf("waiting %s for pods %v to bind: %v; nodes: %v", timeout, names, err, last)
	}
	return last
}

// waitForBoundCount waits up to timeout until exactly want of the pods are
// bound, and returns the bound ones' names.
func (env *testEnv) waitForBoundCount(timeout time.Duration, want int, pods ...*v1.Pod) []string {
	env.t.Helper()
	names := podNames(pods)
	var bound []string
	err := waitFor(env.t.Context(), timeout, func(ctx context.Context) (bool, error) {
		nodes, err := env.boundNodes(ctx, names)
		if err != nil {
			return false, err
		}
		bound = bound[:0]
		for _, n := range names {
			if nodes[n] != "" {
				bound = append(bound, n)
			}
		}
		return len(bound) == want, nil
	})
	if err != nil {
		env.t.Fatalf("waiting %s for %d of pods %v to bind: %v; bound: %v", timeout, want, names, err, bound)
	}
	return bound
}

// expectStaysUnbound checks, for all of window, that none of the pods is
// bound. Bound pods stay bound here (nothing evicts), so looking every
// pollInterval misses no bind.
func (env *testEnv) expectStaysUnbound(window time.Duration, pods ...*v1.Pod) {
	env.t.Helper()
	names := podNames(pods)
	err := staysTrue(env.t.Context(), window, func(ctx context.Context) error {
		nodes, err := env.boundNodes(ctx, names)
		if err != nil {
			return err
		}
		for _, n := range names {
			if nodes[n] != "" {
				return fmt.Errorf("pod %s is bound to %s", n, nodes[n])
			}
		}
		return nil
	})
	if err != nil {
		env.t.Fatalf("within %s: %v", window, err)
	}
}

// staysTrue checks cond every pollInterval for window and returns the first
// error it reports, or nil if it held throughout. cond gets ctx, not a
// context that ends with the window, so a check under way when the window
// closes is not cut short into a false failure.
func staysTrue(ctx context.Context, window time.Duration, cond func(context.Context) error) error {
	end := time.NewTimer(window)
	defer end.Stop()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		if err := cond(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-end.C:
			return nil
		case <-ticker.C:
		}
	}
}

// waitFor polls cond every pollInterval until it reports true or timeout
// passes. An error from cond (a failed list, say) is retried like false and
// reported if the wait times out.
func waitFor(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		done, err := cond(ctx)
		if err != nil && ctx.Err() == nil {
			lastErr = err
		}
		return done && err == nil, nil
	})
	if err != nil && lastErr != nil {
		return fmt.Errorf("%w (last error: %v)", err, lastErr)
	}
	return err
}

// waitForEvent waits up to eventTimeout for an Event with reason about the
// object of the given kind and name in env's namespace, and returns it.
// kube-scheduler records Events through the events.k8s.io/v1 API.
func (env *testEnv) waitForEvent(kind, name, reason string) *eventsv1.Event {
	env.t.Helper()
	var found *eventsv1.Event
	err := waitFor(env.t.Context(), eventTimeout, func(ctx context.Context) (bool, error) {
		list, err := kubeClient.EventsV1().Events(env.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			e := &list.Items[i]
			if e.Regarding.Kind == kind && e.Regarding.Name == name && e.Reason == reason {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		env.t.Fatalf("waiting %s for a %s Event on %s %s/%s: %v", eventTimeout, reason, kind, env.ns, name, err)
	}
	return found
}
