package coscheduling

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// The capacity model against DynamicResources: on small random
// fabrics, the gang plugin's verdict on a gang of whole-device requests and
// the verdict of kube-scheduler's own DynamicResources must agree.
//
//   - A gang the plugin plans, with a plan it counted exactly, passes the
//     framework's Filter on each member's planned node and reserves there,
//     member by member in rank order, as the scheduler would run them:
//     DynamicResources never rejects such a plan.
//   - A gang the plugin says does not fit fits nowhere: an exhaustive search
//     over assignments of members to nodes, each member run through
//     NodeResourcesFit and DynamicResources (PreFilter, Filter, Reserve) in
//     rank order on a fresh cycle, finds none.
//
// The plugin plans with exhaustivePlanner, so that "does not fit" is the
// capacity model's verdict and not a packing heuristic's.

// draAgreementCases is how many random fabrics the test tries;
// draCasesPerEnv of them share one environment (each on nodes of its own,
// which its members select), since building one costs more than the
// cases in it.
const (
	draAgreementCases = 300
	draCasesPerEnv    = 25
)

// caseLabel names the case a node belongs to; each case's members select
// their case's nodes through NodeAffinity.
const caseLabel = "agreement.gpu-gang.x-k8s.io/case"

func TestPlannerAgreesWithDynamicResources(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 2026))
	counts := map[verdict]int{}
	var tried, unions int
	for first := 0; first < draAgreementCases && !t.Failed(); first += draCasesPerEnv {
		cases := make([]*draCase, min(draCasesPerEnv, draAgreementCases-first))
		for k := range cases {
			cases[k] = randomDRACase(rng, first+k)
		}
		env := newDRACasesEnv(t, cases)
		oracle := env.oracleProfile()
		for _, dc := range cases {
			// Not a subtest: env's helpers fail the test that built it.
			v, overlapping := dc.checkOrDescribe(t, env, oracle)
			if t.Failed() {
				break
			}
			tried++
			counts[v]++
			if overlapping {
				unions++
			}
		}
	}
	t.Logf("%d fabrics: %d gangs planned exactly, %d found not to fit, %d planned inexactly; %d asked for device kinds that share devices",
		tried, counts[verdictPlanned], counts[verdictUnfit], counts[verdictInexact], unions)
	// Both verdicts must be common, and gangs whose kinds share devices
	// (where union dimensions do the work) too, or the test proves little.
	if counts[verdictPlanned] < draAgreementCases/5 || counts[verdictUnfit] < draAgreementCases/5 || unions < draAgreementCases/20 {
		t.Errorf("the random fabrics are lopsided: %v, %d with shared devices, of %d", counts, unions, draAgreementCases)
	}
}

// newDRACasesEnv is one environment for cases: their nodes, pods, gangs and
// DRA objects, NVIDIA's DeviceClass and h100Class, with NodeAffinity and
// DynamicResources beside the gang plugin, which plans with
// exhaustivePlanner.
func newDRACasesEnv(t *testing.T, cases []*draCase) *testEnv {
	objects := []runtime.Object{nvidiaClass(), h100Class.DeepCopy()}
	var nodes []*v1.Node
	var pods []*v1.Pod
	var pgs []*v1alpha1.PodGroup
	for _, dc := range cases {
		nodes = append(nodes, dc.nodes...)
		pods = append(append(pods, dc.running...), dc.members...)
		pgs = append(pgs, gangtest.MakePodGroup(dc.gang, testNS).MinMember(int32(len(dc.members))).Obj())
		objects = append(objects, dc.objects...)
	}
	return newTestEnv(t, nodes, pods, pgs, withFilters(t, nodeaffinity.Name), withDRA(),
		withObjects(objects...), withPlanner(exhaustivePlanner{}))
}

type verdict int

const (
	verdictPlanned verdict = iota
	verdictUnfit
	verdictInexact
)

// draCase is one random fabric and gang.
type draCase struct {
	// id numbers the case; gang names its gang. Every name the case gives
	// starts with its prefix, "c<id>-".
	id     int
	gang   string
	prefix string
	nodes  []*v1.Node
	// running are device-plugin pods bound to nodes.
	running []*v1.Pod
	// objects are the ResourceSlices, claims and templates.
	objects []runtime.Object
	// members are the gang's, in rank order; demand[i] names what member i
	// asks for, equal for members that ask for the same.
	members []*v1.Pod
	demand  []string
	// fabric describes the nodes, for failure messages.
	fabric []string
}

// The products the fabrics' GPUs are, and a second DeviceClass that selects
// one of them, beside NVIDIA's.
var (
	draProducts = []string{"A100", "H100"}
	h100Class   = &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "h100.example.com"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.driver == %q && device.attributes[%q].%s == "H100"`,
				scheduling.DRADriverGPU, scheduling.DRADriverGPU, scheduling.DeviceAttributeProductName),
		}}}},
	}
)

// randomDRACase draws a fabric of one to three nodes, most publishing one to
// four GPUs of random products (a quarter of them allocated to another
// workload's claim), some advertising nvidia.com/gpu through the device
// plugin instead (partly used), some both; and a gang of one to four
// members that take GPUs through claims made from the gang's templates,
// through the nvidia.com/gpu mapping, or a mix.
func randomDRACase(rng *rand.Rand, id int) *draCase {
	dc := &draCase{id: id, prefix: fmt.Sprintf("c%d-", id)}
	dc.gang = dc.prefix + "g"
	newNode := func(name string) *v1.Node {
		n := draNode(name)
		n.Labels = map[string]string{caseLabel: fmt.Sprint(id)}
		return n
	}
	for i := range 1 + rng.IntN(3) {
		name := fmt.Sprint(dc.prefix, "n", i)
		r := rng.IntN(8)
		var node *v1.Node
		desc := name + ":"
		if r < 7 {
			node = newNode(name)
			products := make([]string, 1+rng.IntN(4))
			var taken []string
			for d := range products {
				products[d] = draProducts[rng.IntN(len(draProducts))]
				if rng.IntN(4) == 0 {
					taken = append(taken, fmt.Sprint(scheduling.DeviceNameGPUPrefix, d))
				}
			}
			dc.objects = append(dc.objects, gpuSlice(name, products...))
			if len(taken) > 0 {
				dc.objects = append(dc.objects, allocatedClaim("other", "prefill-"+name, name, taken...))
			}
			desc += fmt.Sprintf(" devices %v, allocated %v", products, taken)
		}
		if r >= 6 {
			// The device plugin's GPUs; a node that also publishes devices
			// serves nvidia.com/gpu from these, and claims from those.
			gpus := 1 + rng.IntN(4)
			used := rng.IntN(gpus)
			if node == nil {
				node = newNode(name)
			}
			node.Status.Capacity[gpu] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
			node.Status.Allocatable[gpu] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
			if used > 0 {
				dc.running = append(dc.running, batchPod("busy-"+name, name, fmt.Sprint(used)))
			}
			desc += fmt.Sprintf(" nvidia.com/gpu %d, %d used", gpus, used)
		}
		dc.nodes = append(dc.nodes, node)
		dc.fabric = append(dc.fabric, desc)
	}

	// The gang's templates: what a job's members share.
	templates := make([]*resourceapi.ResourceClaimTemplate, 1+rng.IntN(2))
	for i := range templates {
		class := scheduling.DeviceClassGPU
		if rng.IntN(4) == 0 {
			class = h100Class.Name
		}
		product := []string{"", "", "A100", "H100"}[rng.IntN(4)]
		templates[i] = claimTemplate(testNS, fmt.Sprint(dc.prefix, "gpus-", i), gpuClaimSpec(class, int64(1+rng.IntN(3)), product))
		dc.objects = append(dc.objects, templates[i])
	}
	mode := rng.IntN(3) // claims, mapping, or a mix
	for i := range 1 + rng.IntN(4) {
		claims := mode == 0 || mode == 2 && rng.IntN(2) == 0
		mapped := ""
		if !claims || mode == 2 && rng.IntN(8) == 0 {
			mapped = fmt.Sprint(1 + rng.IntN(3))
		}
		pod := member(dc.gang, fmt.Sprintf("%s-%d", dc.gang, i), mapped)
		pod.Spec.NodeSelector = map[string]string{caseLabel: fmt.Sprint(id)}
		var demand []string
		if claims {
			for e := range 1 + boolInt(rng.IntN(6) == 0) {
				tmpl := templates[rng.IntN(len(templates))]
				claim := claimFromTemplate(pod, fmt.Sprint("gpus-", e), tmpl)
				dc.objects = append(dc.objects, claim)
				demand = append(demand, tmpl.Name)
			}
		}
		dc.members = append(dc.members, pod)
		dc.demand = append(dc.demand, fmt.Sprintf("claims %v, nvidia.com/gpu %q", demand, mapped))
	}
	for _, t := range templates {
		dc.fabric = append(dc.fabric, fmt.Sprintf("template %s: %s", t.Name, describeRequest(t)))
	}
	return dc
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// describeRequest names what a template's one request asks for.
func describeRequest(t *resourceapi.ResourceClaimTemplate) string {
	r := t.Spec.Spec.Devices.Requests[0].Exactly
	s := fmt.Sprintf("%d of %s", r.Count, r.DeviceClassName)
	if len(r.Selectors) > 0 {
		s += " with " + r.Selectors[0].CEL.Expression
	}
	return s
}

func (dc *draCase) String() string {
	var b strings.Builder
	for _, f := range dc.fabric {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	for i, d := range dc.demand {
		fmt.Fprintf(&b, "  member %d: %s\n", i, d)
	}
	return b.String()
}

// checkOrDescribe is check, which describes the case when it fails.
func (dc *draCase) checkOrDescribe(t *testing.T, env *testEnv, oracle framework.Framework) (verdict, bool) {
	defer func() {
		if t.Failed() {
			t.Logf("case %d:\n%s", dc.id, dc)
		}
	}()
	return dc.check(t, env, oracle)
}

// check runs the case in env, whose other cases' nodes its members do not
// select, and asserts that the two verdicts agree: the gang plugin's, and
// DynamicResources' as oracle (a profile of env's scheduler without the
// gang plugin) finds it. overlapping reports whether the gang asks for
// device kinds that share devices, the case union dimensions exist for.
func (dc *draCase) check(t *testing.T, env *testEnv, oracle framework.Framework) (v verdict, overlapping bool) {
	key := gang.Key{Namespace: testNS, Name: dc.gang}
	spec, ok := env.pl.lookup(key)
	if !ok {
		t.Fatal("the gang's PodGroup is unknown")
	}
	d, status := env.pl.core.DemandOf(env.ctx, spec, dc.members, 0)
	if status != nil {
		t.Fatalf("reading the gang's demand: %v", status)
	}
	exact := true
	for i := range dc.members {
		exact = exact && d.Exact(i)
	}
	overlapping = len(d.Unions()) > 0

	state := framework.NewCycleState()
	_, status, _ = env.fh.RunPreFilterPlugins(env.ctx, state, dc.members[0])
	switch {
	case status.IsSuccess() && !exact:
		return verdictInexact, overlapping
	case status.IsSuccess():
		env.replayPlan(key, dc.members, state)
		return verdictPlanned, overlapping
	case status.Code() != fwk.Unschedulable && status.Code() != fwk.UnschedulableAndUnresolvable:
		t.Fatalf("PreFilter of the gang's first member: %v", status)
	}
	o := &draOracle{env: env, profile: oracle, nodes: dc.nodes, members: dc.members, demand: dc.demand, nodeOf: make([]int, len(dc.members))}
	if o.fits(0) {
		names := make([]string, len(o.nodeOf))
		for i, n := range o.nodeOf {
			names[i] = dc.nodes[n].Name
		}
		t.Errorf("the plugin says the gang does not fit (%v), but DynamicResources accepts its members on nodes %v", status, names)
	}
	return verdictUnfit, overlapping
}
