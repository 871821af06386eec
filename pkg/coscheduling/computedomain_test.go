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
	"github.com/gpu-gang/gpu-gang/pkg/computedomain"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
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

// allocatedDaemon is the driver's IMEX daemon claim of domain, as its
// controller's template (computedomain-daemon-<UID>) makes it, allocated
// the daemon device of node.
func allocatedDaemon(t testing.TB, name, domain, node string) *resourceapi.ResourceClaim {
	params, err := json.Marshal(map[string]string{
		"apiVersion": scheduling.ComputeDomainAPIVersion, "kind": scheduling.ComputeDomainDaemonConfigKind, "domainID": domain,
	})
	require.NoError(t, err)
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("claim-" + name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "daemon", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: scheduling.DeviceClassComputeDomainDaemon}}},
			Config: []resourceapi.DeviceClaimConfiguration{{Requests: []string{"daemon"}, DeviceConfiguration: resourceapi.DeviceConfiguration{
				Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: scheduling.DRADriverComputeDomain, Parameters: runtime.RawExtension{Raw: params}},
			}}},
		}},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "daemon", Driver: scheduling.DRADriverComputeDomain, Pool: node, Device: "daemon-0",
			}}},
			NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node},
			}}}}},
		}},
	}
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

	t.Run("a domain's pair that a clique could hold waits for one, with an Event", func(t *testing.T) {
		pair, claims := domainMembers(t, "pair", "uid-a", 2)
		env := newTestEnv(t, fabric(), append(busyPods, pair...), []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("pair", testNS).MinMember(2).Obj(),
		}, withTopology(t), withComputeDomains(fabric(), claims...))
		status := preFilterStatus(env, pair[0])
		require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
		require.True(t, hasEvent(env.recorded(), ReasonTopologyUnsatisfied, "join ComputeDomain uid-a, which stays inside one NVLink clique"))
	})

	t.Run("a domain's triple that no clique could hold spans the fewest whole cliques, and says so", func(t *testing.T) {
		// Cliques of two, one busy node in s0-l1 and in s1-l1.
		triple, claims := domainMembers(t, "triple", "uid-a", 3)
		env := newTestEnv(t, fabric(), append([]*v1.Pod{busy("s0-l1-n0"), busy("s1-l1-n0")}, triple...), []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("triple", testNS).MinMember(3).Obj(),
		}, withTopology(t), withComputeDomains(fabric(), claims...))
		got := plannedNodes(t, env, triple)
		cliques := map[string]int{}
		for _, n := range got {
			cliques["c-"+n[:len("s0-l0")]]++
		}
		// The two whole free cliques, the first by name, though s0 would
		// hold the three in one spine.
		require.Equal(t, map[string]int{"c-s0-l0": 2, "c-s1-l0": 1}, cliques, "planned %v", got)
		note := env.pl.core.DomainNote(gang.Key{Namespace: testNS, Name: "triple"})
		require.Contains(t, note, "ComputeDomain uid-a spans the fewest whole NVLink cliques, 2 (c-s0-l0, c-s1-l0), each used by no other ComputeDomain")
		require.Contains(t, note, "no clique has room for its 3 member(s), the roomiest for 2")
	})

	t.Run("a domain's pair that requires one clique waits for it, with an Event", func(t *testing.T) {
		pair, claims := domainMembers(t, "pair", "uid-a", 2)
		env := newTestEnv(t, fabric(), append(busyPods, pair...), []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("pair", testNS).MinMember(2).Annotation(scheduling.AnnotationTopologyRequired, cliqueLabel).Obj(),
		}, withTopology(t), withComputeDomains(fabric(), claims...))
		status := preFilterStatus(env, pair[0])
		require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
		require.True(t, hasEvent(env.recorded(), ReasonTopologyUnsatisfied, "join ComputeDomain uid-a and its required level keeps the domain inside one NVLink clique"))
	})

	t.Run("a user's looser required level holds the cliques a domain spans", func(t *testing.T) {
		// The whole free cliques, s0-l0 and s1-l0, are in two spines; each
		// spine has room for three in two cliques.
		triple, claims := domainMembers(t, "triple", "uid-a", 3)
		env := newTestEnv(t, fabric(), append([]*v1.Pod{busy("s0-l1-n0"), busy("s1-l1-n0")}, triple...), []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("triple", testNS).MinMember(3).Annotation(scheduling.AnnotationTopologyRequired, spineLabel).Obj(),
		}, withTopology(t), withComputeDomains(fabric(), claims...))
		require.ElementsMatch(t, []string{"s0-l0-n0", "s0-l0-n1", "s0-l1-n1"}, plannedNodes(t, env, triple))
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
		own []string
		// busy are nodes a batch pod fills.
		busy  []string
		size  int
		share string
		// daemons and otherDaemons are nodes where the driver's daemon
		// claim of the gang's domain, or of uid-other, is allocated.
		daemons, otherDaemons []string
		// want is the clique the gang must land in; notIn a clique it
		// must avoid.
		want, notIn string
	}{
		{name: "another domain's labelled node keeps the pair out of its clique", labelled: []string{"s0-l0-n0"}, size: 2, notIn: "c-s0-l0"},
		{name: "another domain's allocated channel counts as the domain running there", allocated: []string{"s0-l0-n1"}, size: 1, notIn: "c-s0-l0"},
		{name: "a single member keeps out of another domain's clique too", labelled: []string{"s0-l0-n0"}, size: 1, notIn: "c-s0-l0"},
		{name: "the annotation lets a domain share the clique, not the node", labelled: []string{"s0-l0-n0"}, size: 1, share: "true", want: "c-s0-l0"},
		{name: "a domain that runs in a clique prefers it", own: []string{"s1-l1-n0"}, size: 1, want: "c-s1-l1"},
		{name: "a domain whose clique has no room grows into a free one", own: []string{"s1-l1-n0"}, busy: []string{"s1-l1-n1"}, size: 2, notIn: "c-s1-l1"},
		{name: "a domain's daemon counts as the domain", daemons: []string{"s1-l0-n0"}, size: 2, want: "c-s1-l0"},
		{name: "another domain's daemon keeps the pair out of its clique", otherDaemons: []string{"s0-l0-n1"}, size: 2, notIn: "c-s0-l0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := runsDomain(runsDomain(fabric(), "uid-other", tt.labelled...), "uid-a", tt.own...)
			gangPods, objs := domainMembers(t, "g", "uid-a", tt.size)
			for i, n := range tt.allocated {
				objs = append(objs, allocatedChannel(t, "old-"+string(rune('a'+i)), "uid-other", n))
			}
			for i, n := range tt.daemons {
				objs = append(objs, allocatedDaemon(t, "daemon-"+string(rune('a'+i)), "uid-a", n))
			}
			for i, n := range tt.otherDaemons {
				objs = append(objs, allocatedDaemon(t, "other-daemon-"+string(rune('a'+i)), "uid-other", n))
			}
			var pods []*v1.Pod
			for _, n := range tt.busy {
				pods = append(pods, busy(n))
			}
			pg := gangtest.MakePodGroup("g", testNS).MinMember(int32(tt.size))
			if tt.share != "" {
				pg = pg.Annotation(scheduling.AnnotationComputeDomainShareClique, tt.share)
			}
			env := newTestEnv(t, nodes, append(pods, gangPods...), []*v1alpha1.PodGroup{pg.Obj()}, withTopology(t), withComputeDomains(nodes, objs...))
			got := plannedNodes(t, env, gangPods)
			clique := cliqueOfNodes(t, got)
			for _, n := range got {
				require.NotContains(t, tt.labelled, n, "a member on another domain's node")
				require.NotContains(t, tt.allocated, n, "a member on another domain's node")
				require.NotContains(t, tt.otherDaemons, n, "a member on another domain's node")
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
	t.Run("a domain that requires one clique but is larger than every clique is too large, with the numbers", func(t *testing.T) {
		triple, claims := domainMembers(t, "triple", "uid-a", 3)
		env := newTestEnv(t, fabric(), triple, []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("triple", testNS).MinMember(3).Annotation(scheduling.AnnotationTopologyRequired, cliqueLabel).Obj(),
		}, withTopology(t), withComputeDomains(fabric(), claims...))
		status := preFilterStatus(env, triple[0])
		require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
		events := env.recorded()
		require.True(t, hasEvent(events, ReasonGangTooLarge, "even with all 8 nodes empty no clique holds its 3 members: the largest of 4 clique(s) has 2 node(s)"), "%v", events)
	})

	t.Run("a domain larger than every clique takes two whole ones", func(t *testing.T) {
		triple, claims := domainMembers(t, "triple", "uid-a", 3)
		env := newTestEnv(t, fabric(), triple, []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("triple", testNS).MinMember(3).Obj(),
		}, withTopology(t), withComputeDomains(fabric(), claims...))
		got := plannedNodes(t, env, triple)
		cliques := map[string]bool{}
		for _, n := range got {
			cliques["c-"+n[:len("s0-l0")]] = true
		}
		require.Len(t, cliques, 2, "planned %v", got)
	})

	t.Run("a domain that fits once other domains end waits", func(t *testing.T) {
		// Sharing cliques is allowed, but another domain runs on one node
		// of each: no clique has two nodes for the pair.
		nodes := runsDomain(fabric(), "uid-other", "s0-l0-n0", "s0-l1-n0", "s1-l0-n0", "s1-l1-n0")
		pair, claims := domainMembers(t, "pair", "uid-a", 2)
		env := newTestEnv(t, nodes, pair, []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("pair", testNS).MinMember(2).Annotation(scheduling.AnnotationComputeDomainShareClique, "true").
				Annotation(scheduling.AnnotationTopologyRequired, cliqueLabel).Obj(),
		}, withTopology(t), withComputeDomains(nodes, claims...))
		status := preFilterStatus(env, pair[0])
		require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
		events := env.recorded()
		require.True(t, hasEvent(events, ReasonTopologyUnsatisfied, "other ComputeDomains run on 4 of the node(s) it could use, or in their NVLink cliques; it fits one clique once they end"), "%v", events)
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
		require.True(t, hasEvent(env.recorded(), ReasonNoFeasibleNodes, "4 node(s) Coscheduling: "+computedomain.RejectOtherDomainClique))
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
			if diff := cmp.Diff(tt.want, computedomain.WithinClique(tt.in, levels)); diff != "" {
				t.Errorf("computedomain.WithinClique(%+v) (-want,+got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestSiteDomain(t *testing.T) {
	noConfig := allocatedChannel(t, "c", "uid-a", "n0")
	noConfig.Spec.Devices.Config = nil
	notChannel := allocatedChannel(t, "c", "uid-a", "n0")
	notChannel.Spec.Devices.Config = nil
	notChannel.Spec.Devices.Requests[0].Exactly.DeviceClassName = "custom"
	notChannel.Status.Allocation.Devices.Results[0].Device = "imex-0"
	daemonNoConfig := allocatedDaemon(t, "d", "uid-a", "n0")
	daemonNoConfig.Spec.Devices.Config = nil
	tests := []struct {
		name  string
		claim *resourceapi.ResourceClaim
		want  string
	}{
		{name: "a channel of a domain", claim: allocatedChannel(t, "c", "uid-a", "n0"), want: "uid-a"},
		{name: "a channel without config is a domain of its own", claim: noConfig, want: "claim " + testNS + "/c"},
		{name: "the driver's daemon claim is its domain", claim: allocatedDaemon(t, "d", "uid-a", "n0"), want: "uid-a"},
		{name: "a daemon of an unknown domain is none", claim: daemonNoConfig, want: ""},
		{name: "another device of the driver is none", claim: notChannel, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, computedomain.SiteDomain(tt.claim))
		})
	}
}
