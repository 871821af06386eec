package integration

// The harness of the DRA tests: a test env that runs the
// resource claim controller and deletes what the test published, and the
// waits and checks on claims.
//
// No kube-controller-manager runs here, so nothing creates claims from
// templates, unreserves the claims of deleted pods, lifts their finalizers
// or collects garbage. newDRAEnv runs kube-controller-manager's own
// resource claim controller (k8s.io/kubernetes/pkg/controller/resourceclaim)
// in this process, with the feature gates of the control plane it talks
// to, so those steps happen as in a cluster. Claims get allocated by the
// scheduler's DynamicResources plugin, which writes status.allocation and
// status.reservedFor in PreBind.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/util/retry"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	claimcontroller "k8s.io/kubernetes/pkg/controller/resourceclaim"
)

// Named timeouts and windows of the DRA tests.
const (
	// draBindBound is how soon after its members are created a DRA gang on
	// free devices must be bound. The goal is about a second, as for
	// gangs on device-plugin GPUs; the rest is slack for a shared machine.
	// Before the DRA work a second gang took 62 s, or never bound.
	draBindBound = 5 * time.Second
	// claimTimeout bounds the wait for the claim controller's claims and
	// the scheduler's allocations of bound pods.
	claimTimeout = 30 * time.Second
	// draWindow is how long a negative check watches claims and pods:
	// several scheduling attempts, kept short so each test takes seconds.
	draWindow = 3 * time.Second
)

// draRejections are DynamicResources' reasons for rejecting a pod on a
// node, as its Filter and PreFilter write them. A member that gets one was
// planned onto devices that are not free.
var draRejections = []string{"cannot allocate all claims", "resourceclaim not available on the node"}

// draEnv is a testEnv for DRA: the resource claim controller runs while the
// test does, and the test's DeviceClasses, ResourceSlices, claims and
// templates are deleted when it ends, cluster-scoped ones included.
type draEnv struct {
	*testEnv
}

// newDRAEnv creates the test's namespace, checks that no earlier test left
// DRA objects behind, starts the resource claim controller and creates the
// DeviceClasses.
func newDRAEnv(t *testing.T, classes ...*resourceapi.DeviceClass) *draEnv {
	t.Helper()
	expectNoDRAObjects(t)
	// Cleanups run last-registered first: the env's own cleanup (Events
	// on failure, then pods, PodGroups and nodes) runs before the DRA
	// objects go, and the controller stops last, as it is what unreserves
	// the deleted pods' claims and lifts their finalizers.
	startClaimController(t)
	env := &draEnv{}
	t.Cleanup(func() { env.deleteDRAObjects() })
	env.testEnv = newTestEnv(t)
	t.Cleanup(func() {
		if t.Failed() {
			ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			defer cancel()
			env.dumpClaims(ctx)
		}
	})
	for _, c := range classes {
		env.createClass(c)
	}
	return env
}

// startClaimController runs the resource claim controller against
// kubeClient until t ends, as kube-controller-manager would: it creates
// claims from templates (for pods and, where DRAWorkloadResourceClaims is
// on, for native PodGroups), records them in the pods' status, and
// unreserves and deallocates claims whose pods are gone. It reads the
// process's feature gates, which the control plane's flags set.
func startClaimController(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logger := klog.Background().WithName("resourceclaim-controller")
	ctx = klog.NewContext(ctx, logger)
	factory := informers.NewSharedInformerFactory(kubeClient, 0)
	ctrl, err := claimcontroller.NewController(logger, kubeClient,
		factory.Core().V1().Pods(),
		factory.Scheduling().V1beta1().PodGroups(),
		factory.Resource().V1().ResourceClaims(),
		factory.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		cancel()
		t.Fatalf("creating the resource claim controller: %v", err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctrl.Run(ctx, 2)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
}

// expectNoDRAObjects fails the test if ResourceSlices or DeviceClasses of
// an earlier test are still there: each test starts from a clean cluster.
func expectNoDRAObjects(t *testing.T) {
	t.Helper()
	sliceList, err := kubeClient.ResourceV1().ResourceSlices().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing ResourceSlices: %v", err)
	}
	classList, err := kubeClient.ResourceV1().DeviceClasses().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing DeviceClasses: %v", err)
	}
	if len(sliceList.Items) > 0 || len(classList.Items) > 0 {
		t.Fatalf("an earlier test left %d ResourceSlices and %d DeviceClasses behind", len(sliceList.Items), len(classList.Items))
	}
}

// mark labels a cluster-scoped object the test creates with the test's
// namespace, as createNodes labels nodes, so that its cleanup finds it.
func (env *draEnv) mark(obj metav1.Object) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[testNodeLabel] = env.ns
	obj.SetLabels(labels)
}

func (env *draEnv) createClass(c *resourceapi.DeviceClass) {
	env.t.Helper()
	c = c.DeepCopy()
	env.mark(c)
	if _, err := kubeClient.ResourceV1().DeviceClasses().Create(env.t.Context(), c, metav1.CreateOptions{}); err != nil {
		env.t.Fatalf("creating DeviceClass %s: %v", c.Name, err)
	}
}

// publish creates ResourceSlices, as a driver's kubelet plugin does.
func (env *draEnv) publish(slices ...*resourceapi.ResourceSlice) {
	env.t.Helper()
	for _, s := range slices {
		s = s.DeepCopy()
		env.mark(s)
		if _, err := kubeClient.ResourceV1().ResourceSlices().Create(env.t.Context(), s, metav1.CreateOptions{}); err != nil {
			env.t.Fatalf("creating ResourceSlice %s: %v", s.Name, err)
		}
	}
}

// publishGPUs publishes the GPUs of the named nodes (names as given to
// createNodes), one pool per node, as the GPU driver's kubelet plugin does.
func (env *draEnv) publishGPUs(m gpuModel, nodes ...string) {
	env.t.Helper()
	for _, n := range nodes {
		full := env.nodeName(n)
		env.publish(nodeSlice(full, gpuDriver, gpuDevices(full, m)))
	}
}

// draNodes creates DRA nodes with the given names and publishes their GPUs.
func (env *draEnv) draNodes(m gpuModel, names ...string) {
	env.t.Helper()
	nodes := make([]*v1.Node, len(names))
	for i, n := range names {
		nodes[i] = draNode(n).Obj()
	}
	env.createNodes(nodes...)
	env.publishGPUs(m, names...)
}

// createDRAFabric creates a labelled fabric (see createFabric) of DRA nodes
// and publishes their GPUs.
func (env *draEnv) createDRAFabric(spines, leaves, nodes, cliqueSize int, m gpuModel) *fabric {
	env.t.Helper()
	f := env.createFabricOf(spines, leaves, nodes, cliqueSize, draNode)
	for _, n := range f.nodes {
		env.publish(nodeSlice(n, gpuDriver, gpuDevices(n, m)))
	}
	return f
}

func (env *draEnv) createClaimTemplate(name string, spec resourceapi.ResourceClaimSpec) {
	env.t.Helper()
	env.createTemplate(&resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: spec},
	})
}

func (env *draEnv) createTemplate(tmpl *resourceapi.ResourceClaimTemplate) {
	env.t.Helper()
	if _, err := kubeClient.ResourceV1().ResourceClaimTemplates(env.ns).Create(env.t.Context(), tmpl, metav1.CreateOptions{}); err != nil {
		env.t.Fatalf("creating ResourceClaimTemplate %s: %v", tmpl.Name, err)
	}
}

func (env *draEnv) createClaim(name string, spec resourceapi.ResourceClaimSpec) {
	env.t.Helper()
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if _, err := kubeClient.ResourceV1().ResourceClaims(env.ns).Create(env.t.Context(), claim, metav1.CreateOptions{}); err != nil {
		env.t.Fatalf("creating ResourceClaim %s: %v", name, err)
	}
}

// claimPod starts a pod outside any gang that takes GPUs through claims.
func (env *draEnv) claimPod(name string, claims ...v1.PodResourceClaim) *v1.Pod {
	return withClaims(env.pod(name).Res(cpuOnly()).Obj(), claims...)
}

// claimGang creates PodGroup name with minMember count, and count members
// <name>-0, <name>-1, ... whose GPUs come through the claims claimsOf
// returns for each member's index.
func (env *draEnv) claimGang(name string, count int, annotations map[string]string, claimsOf func(i int) []v1.PodResourceClaim) []*v1.Pod {
	env.t.Helper()
	env.createGangPodGroup(name, count, annotations)
	pods := make([]*v1.Pod, count)
	for i := range pods {
		pods[i] = withClaims(env.gangPod(fmt.Sprintf("%s-%d", name, i), name).Res(cpuOnly()).Obj(), claimsOf(i)...)
	}
	env.createPods(pods...)
	return pods
}

// templateGang is claimGang with each member's GPUs in a claim of its own
// from template.
func (env *draEnv) templateGang(name string, count int, template string, annotations map[string]string) []*v1.Pod {
	return env.claimGang(name, count, annotations, func(int) []v1.PodResourceClaim {
		return []v1.PodResourceClaim{fromTemplate("gpus", template)}
	})
}

// podClaims returns the ResourceClaims a pod uses, found as kube-scheduler
// finds them: its claims by resourceclaim.Name (named claims, and claims
// made from templates as pod.status.resourceClaimStatuses records them),
// and the claim for extended resources that DRA serves
// (status.extendedResourceClaimStatus). A claim not created yet is left
// out.
func podClaims(ctx context.Context, pod *v1.Pod) ([]*resourceapi.ResourceClaim, error) {
	var names []string
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		switch {
		case errors.Is(err, resourceclaim.ErrClaimNotFound):
			continue
		case err != nil:
			return nil, err
		case name != nil:
			names = append(names, *name)
		}
	}
	if s := pod.Status.ExtendedResourceClaimStatus; s != nil {
		names = append(names, s.ResourceClaimName)
	}
	var claims []*resourceapi.ResourceClaim
	for _, n := range names {
		c, err := kubeClient.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		claims = append(claims, c)
	}
	return claims, nil
}

// podAndClaims reads the pod of env's namespace and the claims it uses
// (see podClaims).
func (env *draEnv) podAndClaims(ctx context.Context, name string) (*v1.Pod, []*resourceapi.ResourceClaim, error) {
	pod, err := kubeClient.CoreV1().Pods(env.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	claims, err := podClaims(ctx, pod)
	return pod, claims, err
}

// reservedFor reports whether the claim is reserved for the pod, or for
// the native PodGroup the pod belongs to (DRAWorkloadResourceClaims).
func reservedFor(claim *resourceapi.ResourceClaim, pod *v1.Pod) bool {
	return resourceclaim.IsReservedForPod(pod, claim, true)
}

// deviceRef names one allocated device.
type deviceRef struct{ driver, pool, device string }

func (d deviceRef) String() string { return d.driver + "/" + d.pool + "/" + d.device }

func allocatedDevices(c *resourceapi.ResourceClaim) []deviceRef {
	if c.Status.Allocation == nil {
		return nil
	}
	var out []deviceRef
	for _, r := range c.Status.Allocation.Devices.Results {
		out = append(out, deviceRef{driver: r.Driver, pool: r.Pool, device: r.Device})
	}
	return out
}

// waitForAllocated waits until every claim of each bound pod exists, is
// allocated and is reserved for it (or its PodGroup), and the pod has
// wantClaims claims; it returns each pod's claims by pod name.
func (env *draEnv) waitForAllocated(wantClaims int, pods ...*v1.Pod) map[string][]*resourceapi.ResourceClaim {
	env.t.Helper()
	out := map[string][]*resourceapi.ResourceClaim{}
	var why string
	err := waitFor(env.t.Context(), claimTimeout, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			got, claims, err := env.podAndClaims(ctx, p.Name)
			if err != nil {
				return false, err
			}
			if len(claims) != wantClaims {
				why = fmt.Sprintf("pod %s has %d claims, want %d", p.Name, len(claims), wantClaims)
				return false, nil
			}
			for _, c := range claims {
				if c.Status.Allocation == nil || !reservedFor(c, got) {
					why = fmt.Sprintf("claim %s of pod %s: allocated %t, reserved for %v", c.Name, p.Name, c.Status.Allocation != nil, consumers(c))
					return false, nil
				}
			}
			out[p.Name] = claims
		}
		return true, nil
	})
	if err != nil {
		env.t.Fatalf("waiting %s for the claims of pods %v to be allocated: %v; %s", claimTimeout, podNames(pods), err, why)
	}
	return out
}

func consumers(c *resourceapi.ResourceClaim) []string {
	var out []string
	for _, r := range c.Status.ReservedFor {
		out = append(out, r.Resource+"/"+r.Name)
	}
	return out
}

// expectDevicesOnNodes waits for the claims of the bound pods to be
// allocated and checks them: each pod's claims hold want[driver] devices of
// each driver, all from the pool of the pod's own node, and no device is
// allocated to two claims. nodes is what waitForBound returned.
func (env *draEnv) expectDevicesOnNodes(nodes map[string]string, want map[string]int, pods ...*v1.Pod) map[string][]*resourceapi.ResourceClaim {
	env.t.Helper()
	claims := env.waitForAllocated(len(want), pods...)
	for _, p := range pods {
		got := map[string]int{}
		for _, c := range claims[p.Name] {
			for _, d := range allocatedDevices(c) {
				got[d.driver]++
				if d.pool != nodes[p.Name] {
					env.t.Errorf("pod %s on %s holds device %s of another node (claim %s)", p.Name, nodes[p.Name], d, c.Name)
				}
			}
		}
		for driver, n := range want {
			if got[driver] != n {
				env.t.Errorf("pod %s holds %d %s devices, want %d", p.Name, got[driver], driver, n)
			}
		}
	}
	env.expectNoDeviceTwice()
	return claims
}

// expectShareClaimOn checks that each member of a gang that shares one
// claim is bound to node (a name given to createNodes) and uses claim,
// allocated there with 8 GPUs.
func (env *draEnv) expectShareClaimOn(nodes map[string]string, node, claim string, pods ...*v1.Pod) {
	env.t.Helper()
	for pod, n := range nodes {
		if n != env.nodeName(node) {
			env.t.Errorf("member %s is on %s; the only node with 8 free GPUs is %s", pod, n, node)
		}
	}
	claims := env.expectDevicesOnNodes(nodes, map[string]int{gpuDriver: 8}, pods...)
	for _, p := range pods {
		if c := claims[p.Name][0]; c.Name != claim {
			env.t.Errorf("member %s uses claim %s, want the shared %s", p.Name, c.Name, claim)
		}
	}
}

// expectNoDeviceTwice fails the test if one device is allocated to two
// claims of the namespace.
func (env *draEnv) expectNoDeviceTwice() {
	env.t.Helper()
	list, err := kubeClient.ResourceV1().ResourceClaims(env.ns).List(env.t.Context(), metav1.ListOptions{})
	if err != nil {
		env.t.Fatalf("listing claims: %v", err)
	}
	owner := map[deviceRef]string{}
	for i := range list.Items {
		c := &list.Items[i]
		for _, d := range allocatedDevices(c) {
			if other, ok := owner[d]; ok {
				env.t.Errorf("device %s is allocated to claims %s and %s", d, other, c.Name)
			}
			owner[d] = c.Name
		}
	}
}

// waitForClaimsCreated waits until the claim controller has created each
// pod's claims from their templates.
func (env *draEnv) waitForClaimsCreated(pods ...*v1.Pod) {
	env.t.Helper()
	err := waitFor(env.t.Context(), claimTimeout, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			got, claims, err := env.podAndClaims(ctx, p.Name)
			if err != nil || len(claims) < len(got.Spec.ResourceClaims) {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		env.t.Fatalf("waiting %s for the claims of pods %v to be created: %v", claimTimeout, podNames(pods), err)
	}
}

// expectNothingHeld checks for all of window that no pod is bound and no
// claim of any pod is allocated or reserved. A gang that waits holds no
// devices: an allocation in flight (a member reserved in the scheduler and
// waiting in Permit) is not in the API, so tests that need to rule that
// out follow this with pods that need every device.
func (env *draEnv) expectNothingHeld(window time.Duration, pods ...*v1.Pod) {
	env.t.Helper()
	err := staysTrue(env.t.Context(), window, func(ctx context.Context) error {
		for _, p := range pods {
			got, claims, err := env.podAndClaims(ctx, p.Name)
			if err != nil {
				return err
			}
			if got.Spec.NodeName != "" {
				return fmt.Errorf("pod %s is bound to %s", p.Name, got.Spec.NodeName)
			}
			for _, c := range claims {
				if c.Status.Allocation != nil || len(c.Status.ReservedFor) > 0 {
					return fmt.Errorf("claim %s of pod %s, which should wait, holds devices %v, reserved for %v", c.Name, p.Name, allocatedDevices(c), consumers(c))
				}
			}
		}
		return nil
	})
	if err != nil {
		env.t.Fatalf("within %s: %v", window, err)
	}
}

// expectNoDRARejections fails the test if the scheduler recorded that
// DynamicResources rejected one of the pods on a node: the gang's plan put
// a member where its devices were not free.
func (env *draEnv) expectNoDRARejections(pods ...*v1.Pod) {
	env.t.Helper()
	names := podNames(pods)
	list, err := kubeClient.EventsV1().Events(env.ns).List(env.t.Context(), metav1.ListOptions{})
	if err != nil {
		env.t.Fatalf("listing Events: %v", err)
	}
	for _, e := range list.Items {
		if e.Regarding.Kind != "Pod" || !slices.Contains(names, e.Regarding.Name) {
			continue
		}
		for _, r := range draRejections {
			if strings.Contains(e.Note, r) {
				env.t.Errorf("pod %s was planned onto devices that are not free: %s: %s", e.Regarding.Name, e.Reason, e.Note)
			}
		}
	}
}

// expectBoundWithin checks that the pods, created at start, were all bound
// within bound of it, and returns where.
func (env *draEnv) expectBoundWithin(start time.Time, bound time.Duration, pods ...*v1.Pod) map[string]string {
	env.t.Helper()
	nodes := env.waitForBound(bindTimeout, pods...)
	took := time.Since(start)
	env.t.Logf("%d pods bound %s after creation", len(pods), took.Round(10*time.Millisecond))
	if took > bound {
		env.t.Errorf("pods %v took %s to bind, want at most %s", podNames(pods), took.Round(10*time.Millisecond), bound)
	}
	return nodes
}

// dumpClaims logs which claims each pod of the namespace uses, and each
// claim with its owner, devices and consumers, to explain a failure.
func (env *draEnv) dumpClaims(ctx context.Context) {
	pods, err := kubeClient.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		env.t.Logf("listing pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		var uses []string
		for _, s := range p.Status.ResourceClaimStatuses {
			uses = append(uses, s.Name+"="+ptr.Deref(s.ResourceClaimName, "(none)"))
		}
		if s := p.Status.ExtendedResourceClaimStatus; s != nil {
			uses = append(uses, "extended="+s.ResourceClaimName)
		}
		if len(p.Spec.ResourceClaims) > 0 || len(uses) > 0 {
			env.t.Logf("pod %s: %d claims in spec, claims made for it: %v", p.Name, len(p.Spec.ResourceClaims), uses)
		}
	}
	claims, err := kubeClient.ResourceV1().ResourceClaims(env.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		env.t.Logf("listing claims: %v", err)
		return
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		var owner string
		if ref := metav1.GetControllerOf(c); ref != nil {
			owner = ref.Kind + "/" + ref.Name
		}
		env.t.Logf("claim %s owner=%s devices=%v reservedFor=%v", c.Name, owner, allocatedDevices(c), consumers(c))
	}
}

// deleteDRAObjects deletes the namespace's claims and templates and the
// test's ResourceSlices and DeviceClasses, after the env's cleanup deleted
// the pods, and waits until they are gone. The claim controller, still
// running, unreserves and deallocates the claims of the deleted pods and
// lifts their finalizers; claims it could not free are freed by force,
// and the test fails.
func (env *draEnv) deleteDRAObjects() {
	t := env.t
	if env.testEnv == nil {
		return
	}
	// One timeout for the wait, another for freeing claims by force after
	// it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*cleanupTimeout)
	defer cancel()
	rs := kubeClient.ResourceV1()
	ours := metav1.ListOptions{LabelSelector: testNodeLabel + "=" + env.ns}
	// A native PodGroup that is not being deleted gets its claims made
	// again by the controller; deleting it first stops that (its
	// protection finalizer keeps it, terminating, as no
	// kube-controller-manager runs).
	if err := kubeClient.SchedulingV1beta1().PodGroups(env.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting the native PodGroups of %s: %v", env.ns, err)
	}
	errs := []error{
		rs.ResourceClaims(env.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}),
		rs.ResourceClaimTemplates(env.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}),
		rs.ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, ours),
		rs.DeviceClasses().DeleteCollection(ctx, metav1.DeleteOptions{}, ours),
		deleteComputeDomains(ctx, env.ns),
	}
	if err := errors.Join(errs...); err != nil {
		t.Errorf("deleting the DRA objects of %s: %v", env.ns, err)
	}
	var left []string
	err := waitFor(ctx, cleanupTimeout, func(ctx context.Context) (bool, error) {
		claims, err := rs.ResourceClaims(env.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		sliceList, err := rs.ResourceSlices().List(ctx, ours)
		if err != nil {
			return false, err
		}
		classList, err := rs.DeviceClasses().List(ctx, ours)
		if err != nil {
			return false, err
		}
		left = left[:0]
		for _, c := range claims.Items {
			left = append(left, "claim "+c.Name)
		}
		for _, s := range sliceList.Items {
			left = append(left, "slice "+s.Name)
		}
		for _, c := range classList.Items {
			left = append(left, "class "+c.Name)
		}
		return len(left) == 0, nil
	})
	if err == nil {
		return
	}
	sort.Strings(left)
	t.Errorf("the DRA objects of %s did not go: %v; still there: %v", env.ns, err, left)
	env.forceDeleteClaims(ctx)
}

// forceDeleteClaims lifts the finalizers of the namespace's claims, so
// that the next test starts clean even when the claim controller failed.
func (env *draEnv) forceDeleteClaims(ctx context.Context) {
	list, err := kubeClient.ResourceV1().ResourceClaims(env.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		env.t.Errorf("listing claims to free them: %v", err)
		return
	}
	for _, c := range list.Items {
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := kubeClient.ResourceV1().ResourceClaims(env.ns).Patch(ctx, c.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			env.t.Errorf("lifting the finalizers of claim %s: %v", c.Name, err)
		}
	}
}

// occupyDevices binds a pod outside any gang to each named node, taking
// GPUs through a claim from template, and returns the pods.
func (env *draEnv) occupyDevices(template string, nodes ...string) []*v1.Pod {
	env.t.Helper()
	var pods []*v1.Pod
	for _, n := range nodes {
		p := env.claimPod("busy-"+n, fromTemplate("gpus", template))
		p.Spec.NodeSelector = map[string]string{v1.LabelHostname: env.nodeName(n)}
		pods = append(pods, p)
	}
	env.createPods(pods...)
	env.waitForBound(bindTimeout, pods...)
	return pods
}

// allocateOutsideScheduler creates claim name and allocates it count GPUs
// of node, reserved for a consumer that is no pod, as a workload
// controller with its own allocator would: the scheduler did not place
// it, and the resource claim controller leaves it alone. It returns the
// claim's name.
func (env *draEnv) allocateOutsideScheduler(name, node string, count int) string {
	env.t.Helper()
	ctx := env.t.Context()
	claims := kubeClient.ResourceV1().ResourceClaims(env.ns)
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{resourceapi.Finalizer}},
		Spec:       gpuClaimSpec(count),
	}
	created, err := claims.Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		env.t.Fatalf("creating ResourceClaim %s: %v", name, err)
	}
	alloc := &resourceapi.AllocationResult{NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{env.nodeName(node)}}},
	}}}}
	for i := range count {
		alloc.Devices.Results = append(alloc.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: created.Spec.Devices.Requests[0].Name, Driver: gpuDriver, Pool: env.nodeName(node), Device: fmt.Sprintf("gpu-%d", i),
		})
	}
	created.Status.Allocation = alloc
	created.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{APIGroup: "example.com", Resource: "trainers", Name: name, UID: types.UID("trainer-" + name)}}
	if _, err := claims.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		env.t.Fatalf("allocating ResourceClaim %s: %v", name, err)
	}
	return name
}

// deallocate lets claim name's devices go: its consumer is done, and its
// allocation is removed, as the controller that made it would.
func (env *draEnv) deallocate(name string) {
	env.t.Helper()
	ctx := env.t.Context()
	claims := kubeClient.ResourceV1().ResourceClaims(env.ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Status.ReservedFor, c.Status.Allocation = nil, nil
		_, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		env.t.Fatalf("deallocating ResourceClaim %s: %v", name, err)
	}
}

// unschedulableAttempts is how many scheduling attempts of the in-process
// scheduler ended unschedulable, over every profile.
func unschedulableAttempts(t *testing.T) float64 {
	t.Helper()
	return labelledSum(t, "scheduler_schedule_attempts_total", "result", "unschedulable")
}
