package coscheduling

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// The ComputeDomain fixtures: fabric()'s nodes (four cliques of two, one
// per leaf) each publish the driver's channel, and domain members take
// one channel each through their own claim, as pods from the domain's
// claim template do.

// withComputeDomains gives the framework a DRA manager with the channel
// DeviceClass, a channel per node, and objs.
func withComputeDomains(nodes []*v1.Node, objs ...runtime.Object) envOption {
	return func(c *envConfig) {
		c.dra = true
		c.objects = append(c.objects, &resourceapi.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: scheduling.DeviceClassComputeDomainChannel},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: `device.driver == "` + scheduling.DRADriverComputeDomain + `"`,
			}}}},
		})
		for _, n := range nodes {
			c.objects = append(c.objects, &resourceapi.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: n.Name + "-channels"},
				Spec: resourceapi.ResourceSliceSpec{
					Driver:   scheduling.DRADriverComputeDomain,
					Pool:     resourceapi.ResourcePool{Name: n.Name, ResourceSliceCount: 1},
					NodeName: ptr.To(n.Name),
					Devices:  []resourceapi.Device{{Name: "channel-0"}},
				},
			})
		}
		c.objects = append(c.objects, objs...)
	}
}

// channelClaim is a claim for one channel of domain, as the driver's
// template asks for it.
func channelClaim(t testing.TB, name, domain string) *resourceapi.ResourceClaim {
	params, err := json.Marshal(map[string]string{
		"apiVersion": scheduling.ComputeDomainAPIVersion, "kind": scheduling.ComputeDomainChannelConfigKind, "domainID": domain,
	})
	require.NoError(t, err)
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("claim-" + name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: scheduling.DeviceClassComputeDomainChannel}}},
			Config: []resourceapi.DeviceClaimConfiguration{{Requests: []string{"channel"}, DeviceConfiguration: resourceapi.DeviceConfiguration{
				Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: scheduling.DRADriverComputeDomain, Parameters: runtime.RawExtension{Raw: params}},
			}}},
		}},
	}
}

// allocatedChannel is a claim of domain whose channel on node is taken.
func allocatedChannel(t testing.TB, name, domain, node string) *resourceapi.ResourceClaim {
	c := channelClaim(t, name, domain)
	c.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "channel", Driver: scheduling.DRADriverComputeDomain, Pool: node, Device: "channel-0",
		}}},
		NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node},
		}}}}},
	}
	return c
}

// domainMembers are n whole-node members of group that join domain, and
// their channel claims.
func domainMembers(t testing.TB, group, domain string, n int) ([]*v1.Pod, []runtime.Object) {
	pods := members(group, n, "8")
	var claims []runtime.Object
	for _, p := range pods {
		claim := p.Name + "-channel"
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "channel", ResourceClaimName: ptr.To(claim)}}
		claims = append(claims, channelClaim(t, claim, domain))
	}
	return pods, claims
}

// runsDomain labels nodes as the driver does while domain runs there.
func runsDomain(nodes []*v1.Node, domain string, names ...string) []*v1.Node {
	for _, n := range nodes {
		for _, name := range names {
			if n.Name == name {
				n.Labels[scheduling.LabelComputeDomain] = domain
			}
		}
	}
	return nodes
}

func cliqueOfNodes(t *testing.T, nodes []string) string {
	t.Helper()
	clique := ""
	for _, n := range nodes {
		c := "c-" + n[:len("s0-l0")]
		if clique != "" && c != clique {
			t.Fatalf("the gang spans cliques: %v", nodes)
		}
		clique = c
	}
	return clique
}

func preFilterStatus(env *testEnv, pod *v1.Pod) *fwk.Status {
	_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), pod)
	return status
}

func TestComputeDomainInOneClique(t *testing.T) {
	// One node of each clique is busy: a pair fits two cliques' free
	// nodes, but no one clique.
	var busyPods []*v1.Pod
	for _, n := range []string{"s0-l0-n0", "s0-l1-n0", "s1-l0-n0", "s1-l1-n0"} {
		busyPods = append(busyPods, busy(n))
	}

	t.Run("a plain pair spans cliques", func(t *testing.T) {
		pair := members("pair", 2, "8")
		env := newTestEnv(t, fabric(), append(busyPods, pair...), []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("pair", testNS).MinMember(2).Obj(),
		}, withTopology(t), withComputeDomains(fabric()))
		got := plannedNodes(t, env, pair)
		require.NotEqual(t, got[0][:len("s0-l0")], got[1][:len("s0-l0")], "the contrast needs a pair that spans: %v", got)
	})

	t.Run("a domain's pair waits for one clique, with an Event", func(t *testing.T) {
		pair, claims := domainMembers(t, "pair", "uid-a", 2)
		env := newTestEnv(t, fabric(), append(busyPods, pair...), []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("pair", testNS).MinMember(2).Obj(),
		}, withTopology(t), withComputeDomains(fabric(), claims...))
		status := preFilterStatus(env, pair[0])
		require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
		require.True(t, hasEvent(env.recorded(), ReasonTopologyUnsatisfied, "join ComputeDomain uid-a, which works only inside one NVLink clique"))
	})

	t.Run("a user's looser required level is tightened to the clique", func(t *testing.T) {
		pair, claims := domainMembers(t, "pair", "uid-a", 2)
		env := newTestEnv(t, fabric(), append(busyPods, pair...), []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("pair", testNS).MinMember(2).Annotation(scheduling.AnnotationTopologyRequired, spineLabel).Obj(),
		}, withTopology(t), withComputeDomains(fabric(), claims...))
		status := preFilterStatus(env, pair[0])
		require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	})
}

func TestComputeDomainsKeptApart(t *testing.T) {
	tests := []struct {
		name string
		// labelled are nodes the driver labels for domain uid-other.
		labelled []string
		// allocated are nodes whose channel a claim of uid-other holds.
		allocated []string
		// own are nodes the driver labels for the gang's own domain.
		own   []string
		size  int
		share string
		// want is the clique the gang must land in; notIn a clique it
		// must avoid.
		want, notIn string
	}{
		{name: "another domain's labelled node keeps the pair out of its clique", labelled: []string{"s0-l0-n0"}, size: 2, notIn: "c-s0-l0"},
		{name: "another domain's allocated channel counts as the domain running there", allocated: []string{"s0-l0-n1"}, size: 1, notIn: "c-s0-l0"},
		{name: "a single member keeps out of another domain's clique too", labelled: []string{"s0-l0-n0"}, size: 1, notIn: "c-s0-l0"},
		{name: "the annotation lets a domain share the clique, not the node", labelled: []string{"s0-l0-n0"}, size: 1, share: "true", want: "c-s0-l0"},
		{name: "a domain that runs in a clique stays in it", own: []string{"s1-l1-n0"}, size: 1, want: "c-s1-l1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := runsDomain(runsDomain(fabric(), "uid-other", tt.labelled...), "uid-a", tt.own...)
			gangPods, objs := domainMembers(t, "g", "uid-a", tt.size)
			for i, n := range tt.allocated {
				objs = append(objs, allocatedChannel(t, "old-"+string(rune('a'+i)), "uid-other", n))
			}
			pg := gangtest.MakePodGroup("g", testNS).MinMember(int32(tt.size))
			if tt.share != "" {
				pg = pg.Annotation(scheduling.AnnotationComputeDomainShareClique, tt.share)
			}
			env := newTestEnv(t, nodes, gangPods, []*v1alpha1.PodGroup{pg.Obj()}, withTopology(t), withComputeDomains(nodes, objs...))
			got := plannedNodes(t, env, gangPods)
			clique := cliqueOfNodes(t, got)
			for _, n := range got {
				require.NotContains(t, tt.labelled, n, "a member on another domain's node")
				require.NotContains(t, tt.allocated, n, "a member on another domain's node")
			}
			if tt.want != "" {
				require.Equal(t, tt.want, clique, "planned %v", got)
			}
			if tt.notIn != "" {
				require.NotEqual(t, tt.notIn, clique, "planned %v", got)
			}
		})
	}
}

func TestComputeDomainDoesNotFit(t *testing.T) {
	t.Run("a domain larger than every clique is too large, with the numbers", func(t *testing.T) {
		triple, claims := domainMembers(t, "triple", "uid-a", 3)
		env := newTestEnv(t, fabric(), triple, []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("triple", testNS).MinMember(3).Obj(),
		}, withTopology(t), withComputeDomains(fabric(), claims...))
		status := preFilterStatus(env, triple[0])
		require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
		events := env.recorded()
		require.True(t, hasEvent(events, ReasonGangTooLarge, "even with all 8 nodes empty no clique holds its 3 members: the largest of 4 clique(s) has 2 node(s)"), "%v", events)
	})

	t.Run("a domain that fits once other domains end waits", func(t *testing.T) {
		// Sharing cliques is allowed, but another domain runs on one node
		// of each: no clique has two nodes for the pair.
		nodes := runsDomain(fabric(), "uid-other", "s0-l0-n0", "s0-l1-n0", "s1-l0-n0", "s1-l1-n0")
		pair, claims := domainMembers(t, "pair", "uid-a", 2)
		env := newTestEnv(t, nodes, pair, []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("pair", testNS).MinMember(2).Annotation(scheduling.AnnotationComputeDomainShareClique, "true").Obj(),
		}, withTopology(t), withComputeDomains(nodes, claims...))
		status := preFilterStatus(env, pair[0])
		require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
		events := env.recorded()
		require.True(t, hasEvent(events, ReasonTopologyUnsatisfied, "other ComputeDomains run on 4 of the node(s) it could use"), "%v", events)
		require.False(t, hasEvent(events, ReasonGangTooLarge, ""), "%v", events)
	})

	t.Run("with every clique taken by other domains no node accepts the pair", func(t *testing.T) {
		nodes := runsDomain(fabric(), "uid-other", "s0-l0-n0", "s0-l1-n0", "s1-l0-n0", "s1-l1-n0")
		pair, claims := domainMembers(t, "pair", "uid-a", 2)
		env := newTestEnv(t, nodes, pair, []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("pair", testNS).MinMember(2).Obj(),
		}, withTopology(t), withComputeDomains(nodes, claims...))
		status := preFilterStatus(env, pair[0])
		require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
		require.True(t, hasEvent(env.recorded(), ReasonNoFeasibleNodes, "4 node(s) Coscheduling: "+rejectOtherDomainClique))
	})
}

func TestComputeDomainInvalidGangs(t *testing.T) {
	t.Run("members that join two domains", func(t *testing.T) {
		a, claimsA := domainMembers(t, "g", "uid-a", 1)
		b, claimsB := domainMembers(t, "g", "uid-b", 1)
		b[0] = member("g", "g-1", "8")
		b[0].Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "channel", ResourceClaimName: ptr.To("g-1-channel")}}
		claimsB = []runtime.Object{channelClaim(t, "g-1-channel", "uid-b")}
		pods := append(a, b...)
		env := newTestEnv(t, fabric(), pods, []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("g", testNS).MinMember(2).Obj(),
		}, withTopology(t), withComputeDomains(fabric(), append(claimsA, claimsB...)...))
		status := preFilterStatus(env, pods[0])
		require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
		require.True(t, hasEvent(env.recorded(), ReasonInvalidPodGroup, "member g-0 joins ComputeDomain uid-a and member g-1 joins uid-b"))
	})

	t.Run("a share annotation that is not a boolean", func(t *testing.T) {
		pair, claims := domainMembers(t, "pair", "uid-a", 2)
		env := newTestEnv(t, fabric(), pair, []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("pair", testNS).MinMember(2).Annotation(scheduling.AnnotationComputeDomainShareClique, "yes please").Obj(),
		}, withTopology(t), withComputeDomains(fabric(), claims...))
		status := preFilterStatus(env, pair[0])
		require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
		require.True(t, hasEvent(env.recorded(), ReasonInvalidPodGroup, `compute-domain-share-clique="yes please" is not a boolean`))
	})
}

func TestWithinClique(t *testing.T) {
	levels, err := scheduling.ResolveLevels(scheduling.DefaultPreset, nil)
	require.NoError(t, err)
	clique := placement.Policy{Level: cliqueLabel, Required: true}
	tests := []struct {
		name     string
		in, want placement.Policy
	}{
		{name: "no policy", in: placement.Policy{}, want: clique},
		{name: "preferred node level", in: placement.Policy{Level: scheduling.HostnameKey}, want: clique},
		{name: "required leaf", in: placement.Policy{Level: leafLabel, Required: true}, want: clique},
		{name: "required clique", in: clique, want: clique},
		{name: "required node level stays", in: placement.Policy{Level: scheduling.HostnameKey, Required: true}, want: placement.Policy{Level: scheduling.HostnameKey, Required: true}},
		{name: "an unknown required level", in: placement.Policy{Level: "example.com/rack", Required: true}, want: clique},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, withinClique(tt.in, levels)); diff != "" {
				t.Errorf("withinClique(%+v) (-want,+got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestClaimDomain(t *testing.T) {
	gpus := &resourceapi.ResourceClaim{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: scheduling.DeviceClassGPU}}},
	}}}
	noConfig := channelClaim(t, "c", "uid-a")
	noConfig.Spec.Devices.Config = nil
	firstAvailable := noConfig.DeepCopy()
	firstAvailable.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "channel", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "default", DeviceClassName: scheduling.DeviceClassComputeDomainChannel},
	}}}
	fromAllocation := allocatedChannel(t, "c", "uid-a", "n0")
	fromAllocation.Spec.Devices.Config = nil
	fromAllocation.Spec.Devices.Requests[0].Exactly.DeviceClassName = "some-other-class"
	otherDriver := channelClaim(t, "c", "uid-a")
	otherDriver.Spec.Devices.Requests[0].Exactly.DeviceClassName = "some-other-class"
	otherDriver.Spec.Devices.Config[0].Opaque.Driver = scheduling.DRADriverGPU
	tests := []struct {
		name  string
		claim *resourceapi.ResourceClaim
		want  string
	}{
		{name: "the driver's config names the domain", claim: channelClaim(t, "c", "uid-a"), want: "uid-a"},
		{name: "the channel class without config", claim: noConfig, want: "fallback"},
		{name: "the channel class as a firstAvailable subrequest", claim: firstAvailable, want: "fallback"},
		{name: "an allocated channel", claim: fromAllocation, want: "fallback"},
		{name: "a GPU claim", claim: gpus, want: ""},
		{name: "another driver's config", claim: otherDriver, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, claimDomain(tt.claim, func() string { return "fallback" }))
		})
	}
}
