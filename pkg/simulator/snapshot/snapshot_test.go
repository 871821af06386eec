package snapshot

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

const (
	leafKey   = "network.topology.nvidia.com/leaf"
	spineKey  = "network.topology.nvidia.com/spine"
	cliqueKey = "nvidia.com/gpu.clique"
)

var created = metav1.NewTime(time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC))

func gpuNode(name, spine, leaf, clique string, gpus int64) *v1.Node {
	labels := map[string]string{scheduling.HostnameKey: name, spineKey: spine, leafKey: leaf, "example.com/secret-rack": "rack " + name}
	if clique != "" {
		labels[cliqueKey] = clique
	}
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("190")}
	if gpus > 0 {
		alloc[fabric.GPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return &v1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: created},
		Status:     v1.NodeStatus{Allocatable: alloc, Capacity: alloc},
	}
}

func gpuPod(ns, name string, gpus int64, minutes int) *v1.Pod {
	c := v1.Container{Name: "main", Image: "train"}
	if gpus > 0 {
		q := *resource.NewQuantity(gpus, resource.DecimalSI)
		c.Resources = v1.ResourceRequirements{Requests: v1.ResourceList{fabric.GPU: q}, Limits: v1.ResourceList{fabric.GPU: q}}
	}
	return &v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, CreationTimestamp: metav1.NewTime(created.Add(time.Duration(minutes) * time.Minute))},
		Spec:       v1.PodSpec{Containers: []v1.Container{c}},
		Status:     v1.PodStatus{Phase: v1.PodPending},
	}
}

func on(p *v1.Pod, node string) *v1.Pod {
	p.Spec.NodeName = node
	p.Status.Phase = v1.PodRunning
	return p
}

func member(p *v1.Pod, group string) *v1.Pod {
	p.Labels = map[string]string{scheduling.PodGroupLabel: group}
	return p
}

func podGroup(ns, name string, minMember int32, minutes int, annotations map[string]string) *v1alpha1.PodGroup {
	return &v1alpha1.PodGroup{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations,
			CreationTimestamp: metav1.NewTime(created.Add(time.Duration(minutes) * time.Minute))},
		Spec: v1alpha1.PodGroupSpec{MinMember: minMember},
	}
}

// list renders objects as kubectl's v1 List.
func list(t *testing.T, objs ...runtime.Object) []byte {
	t.Helper()
	l := &metav1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, o := range objs {
		raw, err := json.Marshal(o)
		require.NoError(t, err)
		l.Items = append(l.Items, runtime.RawExtension{Raw: raw})
	}
	data, err := yaml.Marshal(l)
	require.NoError(t, err)
	return data
}

// cluster is 2 spines x 2 leaves x 2 nodes of 8 GPUs, cliques of two, and a
// CPU-only node; some GPUs in use; two gangs and two GPU pods pending.
func cluster() []runtime.Object {
	var objs []runtime.Object
	for s := range 2 {
		for l := range 2 {
			for n := range 2 {
				leaf := fmt.Sprintf("leaf-%d%c", s, 'a'+l)
				objs = append(objs, gpuNode(fmt.Sprintf("gpu-%d%c-%d", s, 'a'+l, n), fmt.Sprint("spine-", s), leaf, leaf+"-nvl", 8))
			}
		}
	}
	objs = append(objs, gpuNode("cpu-0", "", "", "", 0),
		on(gpuPod("serve", "infer-0", 4, 1), "gpu-0a-0"),
		on(gpuPod("kube-system", "device-plugin", 0, 0), "gpu-0a-0"),
		on(gpuPod("serve", "infer-1", 2, 2), "gpu-1b-1"),
		podGroup("train", "big", 4, 10, map[string]string{scheduling.AnnotationTopologyRequired: spineKey}),
		podGroup("train", "running", 1, 5, nil),
		on(member(gpuPod("train", "running-0", 8, 5), "running"), "gpu-1a-0"),
	)
	for i := range 4 {
		objs = append(objs, member(gpuPod("train", fmt.Sprint("big-", i), 8, 10), "big"))
	}
	objs = append(objs,
		podGroup("hpc", "mpi", 3, 12, nil),
		member(gpuPod("hpc", "mpi-launcher", 0, 12), "mpi"),
		member(gpuPod("hpc", "mpi-worker-0", 2, 12), "mpi"),
		member(gpuPod("hpc", "mpi-worker-1", 2, 12), "mpi"),
		gpuPod("serve", "notebook", 1, 11),
		gpuPod("serve", "early", 2, 3),
	)
	finished := on(gpuPod("train", "done", 8, 0), "gpu-0b-0")
	finished.Status.Phase = v1.PodSucceeded
	return append(objs, finished)
}

func nvidiaOptions(keep bool) Options {
	levels, _ := scheduling.Preset("nvidia")
	return Options{Name: "test", Preset: "nvidia", Levels: levels, KeepNames: keep, Timeout: time.Minute}
}

func TestParseSortsWhatRunsAndWhatWaits(t *testing.T) {
	s, err := Parse(list(t, cluster()...))
	require.NoError(t, err)
	require.Len(t, s.Nodes, 8, "the CPU-only node is left out")
	require.Equal(t, []BoundPod{
		{Namespace: "serve", Name: "infer-0", Node: "gpu-0a-0", GPUs: 4},
		{Namespace: "serve", Name: "infer-1", Node: "gpu-1b-1", GPUs: 2},
		{Namespace: "train", Name: "running-0", Node: "gpu-1a-0", GPUs: 8},
	}, s.Bound)
	var gangs []string
	for _, g := range s.Gangs {
		gangs = append(gangs, fmt.Sprintf("%s:%d", g.Key, len(g.Members)))
	}
	require.Equal(t, []string{"train/big:4", "hpc/mpi:2"}, gangs, "gangs with pending members, in creation order; the launcher left out")
	require.Equal(t, []string{"early", "notebook"}, []string{s.Pending[0].Name, s.Pending[1].Name})
	require.Equal(t, []string{
		"1 nodes without accelerators",
		"1 pods without accelerators",
		"1 pending gang members without accelerators (launchers, say), from their gangs",
		"1 finished or terminating pods",
	}, s.Notes)
}

func TestInputAnonymized(t *testing.T) {
	s, err := Parse(list(t, cluster()...))
	require.NoError(t, err)
	in, err := s.Input(nvidiaOptions(false))
	require.NoError(t, err)

	var names []string
	for _, n := range in.Layout.Nodes {
		names = append(names, n.Name)
		for k, v := range n.Labels {
			require.NotContains(t, v, "gpu-", "label %s=%s leaks a real name", k, v)
			require.Contains(t, []string{scheduling.HostnameKey, leafKey, spineKey, cliqueKey}, k, "only topology labels are kept")
		}
	}
	require.Equal(t, []string{"s0-l0-n0", "s0-l0-n1", "s0-l1-n0", "s0-l1-n1", "s1-l0-n0", "s1-l0-n1", "s1-l1-n0", "s1-l1-n1"}, names)
	require.Equal(t, "s1-l1-c0", in.Layout.Nodes[7].Labels[cliqueKey])
	require.Equal(t, 64, in.Layout.TotalGPUs())
	require.Equal(t, 2, in.Layout.Spines)
	require.Len(t, in.Layout.Leaves, 4)
	require.Len(t, in.Layout.Cliques, 4)

	require.Equal(t, []fabric.PrefillPod{{Node: 0, GPUs: 4}, {Node: 7, GPUs: 2}, {Node: 4, GPUs: 8}}, in.Prefill)

	want := []scenario.Job{
		{Name: "pod-000", Pods: 1, GPUsPerPod: 2, At: 0},
		{Name: "gang-000", Gang: true, Pods: 4, GPUsPerPod: 8, At: arrivalGap, Topology: &scenario.Topology{Level: scenario.TierSpine, Required: true}},
		{Name: "pod-001", Pods: 1, GPUsPerPod: 1, At: 2 * arrivalGap},
		{Name: "gang-001", Gang: true, Pods: 2, GPUsPerPod: 2, At: 3 * arrivalGap},
	}
	if diff := cmp.Diff(want, in.Jobs); diff != "" {
		t.Errorf("jobs (-want,+got):\n%s", diff)
	}
	require.NotContains(t, in.Description, "train")
	require.Contains(t, in.Description, "8 nodes with 64 GPUs, 14 of them held by 3 running pods; 2 pending gangs and 2 pending pods")
}

func TestInputKeepNames(t *testing.T) {
	s, err := Parse(list(t, cluster()...))
	require.NoError(t, err)
	in, err := s.Input(nvidiaOptions(true))
	require.NoError(t, err)
	require.Equal(t, "gpu-0a-0", in.Layout.Nodes[0].Name)
	require.Equal(t, "rack gpu-0a-0", in.Layout.Nodes[0].Labels["example.com/secret-rack"])
	var jobs []string
	for _, j := range in.Jobs {
		jobs = append(jobs, j.Name)
	}
	require.Equal(t, []string{"serve.early", "train.big", "serve.notebook", "hpc.mpi"}, jobs)
}

func TestJobNamesFitLabels(t *testing.T) {
	j := newJobNamer(true)
	long := strings.Repeat("x", 80)
	a, b := j.gang("NS_1", long), j.gang("NS_1", long)
	require.LessOrEqual(t, len(a), maxJobName)
	require.LessOrEqual(t, len(b), maxJobName)
	require.NotEqual(t, a, b)
	require.True(t, strings.HasPrefix(a, "ns-1."), a)
}

// Each kind of bad snapshot gets an error that names the object and says
// what to do.
func TestParseErrors(t *testing.T) {
	noAlloc := gpuNode("gpu-x", "s", "l", "", 8)
	noAlloc.Status.Allocatable = nil
	nameless := gpuPod("ns", "", 1, 0)
	nameless.Namespace = "ns"
	noContainers := gpuPod("ns", "empty", 1, 0)
	noContainers.Spec.Containers = nil
	deploy := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"}}}
	base := []runtime.Object{gpuNode("gpu-0", "s", "l", "", 8), gpuPod("ns", "wait", 1, 0)}
	for _, tc := range []struct {
		name string
		data []byte
		want []string
	}{
		{"unknown kind", list(t, append(base, deploy)...), []string{"items[2] (Deployment web)", "not apps/v1 Deployment", Command}},
		{"node without allocatable", list(t, append(base, noAlloc)...), []string{"Node gpu-x has no status.allocatable"}},
		{"pod without a name", list(t, append(base, nameless)...), []string{"a Pod has no metadata.name"}},
		{"pod without containers", list(t, append(base, noContainers)...), []string{"Pod ns/empty has no spec.containers"}},
		{"pod on a missing node", list(t, append(base, on(gpuPod("ns", "lost", 1, 0), "gone"))...), []string{"Pod ns/lost runs on node gone"}},
		{"member of a missing PodGroup", list(t, append(base, member(gpuPod("ns", "m", 1, 0), "nope"))...), []string{"Pod ns/m joins PodGroup ns/nope", "include podgroups"}},
		{"PodGroup with minMember 0", list(t, append(base, podGroup("ns", "zero", 0, 0, nil))...), []string{"PodGroup ns/zero: spec.minMember is 0"}},
		{"no GPU nodes", list(t, gpuNode("cpu", "", "", "", 0), gpuPod("ns", "wait", 1, 0)), []string{"no node has allocatable nvidia.com/gpu"}},
		{"nothing pending", list(t, base[0]), []string{"no pending pod asks for nvidia.com/gpu"}},
		{"not a list of objects", []byte("items: [{name: x}]\nkind: List\napiVersion: v1\n"), []string{"without apiVersion or kind"}},
		{"empty", []byte("# nothing\n"), []string{"no objects"}},
		{"two problems, two errors", list(t, append(base, deploy, noAlloc)...), []string{"Deployment web", "Node gpu-x has no status.allocatable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.data)
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestInputErrors(t *testing.T) {
	over := list(t, gpuNode("gpu-0", "s", "l", "", 8), on(gpuPod("a", "x", 6, 0), "gpu-0"), on(gpuPod("a", "y", 4, 0), "gpu-0"), gpuPod("a", "w", 1, 0))
	s, err := Parse(over)
	require.NoError(t, err)
	_, err = s.Input(nvidiaOptions(false))
	require.ErrorContains(t, err, "node gpu-0: its pods ask for 10 nvidia.com/gpu, more than its 8 allocatable")

	badLevel := list(t, gpuNode("gpu-0", "s", "l", "", 8), podGroup("a", "g", 1, 0, map[string]string{scheduling.AnnotationTopologyRequired: "example.com/rack"}),
		member(gpuPod("a", "g-0", 8, 0), "g"))
	s, err = Parse(badLevel)
	require.NoError(t, err)
	_, err = s.Input(nvidiaOptions(false))
	require.ErrorContains(t, err, "PodGroup a/g: its required topology level example.com/rack is not one the simulator places by")
}

// A stream of objects and Lists, as several kubectl calls print them,
// reads like one List.
func TestParseStream(t *testing.T) {
	objs := cluster()
	var docs []string
	docs = append(docs, string(list(t, objs[:4]...)))
	for _, o := range objs[4:] {
		data, err := yaml.Marshal(o)
		require.NoError(t, err)
		docs = append(docs, string(data))
	}
	s, err := Parse([]byte(strings.Join(docs, "---\n")))
	require.NoError(t, err)
	require.Len(t, s.Nodes, 8)
	require.Len(t, s.Gangs, 2)
}

// The snapshot shipped in scenarios/ reads, and becomes the input its
// README describes.
func TestShippedSnapshot(t *testing.T) {
	s, err := Load("../../../scenarios/snapshots/h100.yaml")
	require.NoError(t, err)
	in, err := s.Input(nvidiaOptions(false))
	require.NoError(t, err)
	require.Len(t, in.Layout.Nodes, 32)
	require.Equal(t, 256, in.Layout.TotalGPUs())
	require.Equal(t, 2, in.Layout.Spines)
	require.Len(t, in.Layout.Leaves, 8)
	require.Len(t, in.Layout.Cliques, 16)
	held := 0
	for _, p := range in.Prefill {
		held += p.GPUs
	}
	require.Equal(t, 8*8+4*8+28, held, "the running gangs and the inference pods")
	var jobs []string
	for _, j := range in.Jobs {
		jobs = append(jobs, fmt.Sprintf("%s %dx%d", j.Name, j.Pods, j.GPUsPerPod))
	}
	require.Equal(t, []string{"gang-000 4x8", "pod-000 1x1", "gang-001 2x8", "gang-002 3x4", "pod-001 1x1", "gang-003 4x2", "pod-002 1x4"}, jobs)
	require.Equal(t, &scenario.Topology{Level: scenario.TierLeaf, Required: true}, in.Jobs[0].Topology)
	require.Equal(t, &scenario.Topology{Level: scenario.TierClique}, in.Jobs[2].Topology)
	require.Equal(t, int32(1000), in.Jobs[0].Priority)
}

func TestFetchList(t *testing.T) {
	var kubeObjs, groups []runtime.Object
	for _, o := range cluster() {
		if g, ok := o.(*v1alpha1.PodGroup); ok {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(g)
			require.NoError(t, err)
			groups = append(groups, &unstructured.Unstructured{Object: u})
			continue
		}
		kubeObjs = append(kubeObjs, o)
	}
	// A gang of Kubernetes' own PodGroups, listed through the typed client.
	kubeObjs = append(kubeObjs, gangtest.MakeNativePodGroup("native", "train").MinCount(1).Created(created.Add(20*time.Minute)).Obj(),
		gangtest.InNativeGroup(gpuPod("train", "native-0", 8, 20), "native"))
	kube := fake.NewClientset(kubeObjs...)
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{podGroups: "PodGroupList"}, groups...)
	data, err := FetchList(t.Context(), kube, dyn)
	require.NoError(t, err)
	s, err := Parse(data)
	require.NoError(t, err)
	require.Len(t, s.Nodes, 8)
	require.Len(t, s.Gangs, 3)
	require.Equal(t, gang.Key{API: gang.Native, Namespace: "train", Name: "native"}, s.Gangs[2].Key)
	require.Len(t, s.Bound, 3)
	require.NotContains(t, string(data), "managedFields")

	// A cluster without the PodGroup CRD has no gangs, and is no error.
	dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{podGroups: "PodGroupList"})
	data, err = FetchList(t.Context(), fake.NewClientset(gpuNode("gpu-0", "s", "l", "", 8), gpuPod("ns", "w", 1, 0)), dyn)
	require.NoError(t, err)
	s, err = Parse(data)
	require.NoError(t, err)
	require.Empty(t, s.Gangs)
	require.Equal(t, ptr.To(1), ptr.To(len(s.Pending)))
	require.True(t, slices.ContainsFunc(s.Nodes, func(n Node) bool { return n.Name == "gpu-0" }))
}
