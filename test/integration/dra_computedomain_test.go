package integration

// ComputeDomains: multi-node NVLink on GB200/GB300
// racks through NVIDIA's DRA driver. A user creates a ComputeDomain
// (resource.nvidia.com/v1beta1) that names a ResourceClaimTemplate; the
// driver's controller creates that template, asking for one channel of
// DeviceClass compute-domain-default-channel.nvidia.com with the domain's
// UID in its opaque config; every pod of the workload takes a channel
// through it. The driver's kubelet plugin publishes, per node, a pool with
// the channel-0 and daemon-0 devices (driver compute-domain.nvidia.com),
// and labels a node resource.nvidia.com/computeDomain=<domain UID> while the
// domain runs there; it refuses a node labelled for another domain. The
// tests create the same objects and set the label as the driver would.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
)

// What the driver's chart and controller use for ComputeDomains
// (templates/compute-domain-workload-claim-template.tmpl.yaml,
// cmd/compute-domain-controller/computedomain.go).
const (
	computeDomainDriver    = "compute-domain.nvidia.com"
	channelClassName       = "compute-domain-default-channel.nvidia.com"
	channelClassSelector   = `device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].type == 'channel' && device.attributes['compute-domain.nvidia.com'].id == 0`
	computeDomainLabel     = "resource.nvidia.com/computeDomain"
	computeDomainTarget    = "resource.nvidia.com/computeDomainTarget"
	computeDomainAPI       = "resource.nvidia.com/v1beta1"
	computeDomainCRD       = "testdata/computedomains.resource.nvidia.com.yaml"
	daemonClassName        = "compute-domain-daemon.nvidia.com"
	daemonClassSelector    = `device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].type == 'daemon'`
	gb200GPUsPerNode       = 4
	gb200ClaimTemplateName = "gpu-4"
)

var computeDomainGVR = schema.GroupVersionResource{Group: "resource.nvidia.com", Version: "v1beta1", Resource: "computedomains"}

func channelClass() *resourceapi.DeviceClass {
	return deviceClass(channelClassName, channelClassSelector)
}

// channelDevices are the devices the ComputeDomain kubelet plugin publishes
// for its node: the default channel and the daemon
// (cmd/compute-domain-kubelet-plugin/deviceinfo.go; channels other than 0
// are not published per node).
func channelDevices() []resourceapi.Device {
	dev := func(name, typ string) resourceapi.Device {
		return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"type": {StringValue: ptr.To(typ)},
			"id":   {IntValue: ptr.To[int64](0)},
		}}
	}
	return []resourceapi.Device{dev("channel-0", "channel"), dev("daemon-0", "daemon")}
}

// createNVLinkFabric creates count GB200 compute trays in one leaf, every
// cliqueSize of them in one NVLink clique, and publishes their GPUs and
// channels. Node n is s0-l0-n<n>, in clique s0-l0-c<n/cliqueSize>.
func (env *draEnv) createNVLinkFabric(count, cliqueSize int) *fabric {
	env.t.Helper()
	f := env.createDRAFabric(1, 1, count, cliqueSize, gb200DRA)
	for _, n := range f.nodes {
		env.publish(nodeSlice(n, computeDomainDriver, channelDevices()))
	}
	env.createClaimTemplate(gb200ClaimTemplateName, gpuClaimSpec(gb200GPUsPerNode))
	return f
}

// computeDomain is one ComputeDomain and the channel template the driver's
// controller created for it.
type computeDomain struct {
	name, uid, template string
}

func computeDomainClient() (dynamic.NamespaceableResourceInterface, error) {
	dyn, err := dynamic.NewForConfig(controlPlane.JSONConfig())
	if err != nil {
		return nil, err
	}
	return dyn.Resource(computeDomainGVR), nil
}

// createComputeDomain creates a ComputeDomain as a user does, and the
// ResourceClaimTemplate for its channel as the driver's controller does:
// labelled with the domain's UID, one channel request, and the domain's
// UID in the opaque ComputeDomainChannelConfig. The driver also puts a
// finalizer on the template, which only its controller lifts; this one
// has none.
func (env *draEnv) createComputeDomain(name string, numNodes int) computeDomain {
	env.t.Helper()
	ctx := env.t.Context()
	if err := controlPlane.InstallCRDs(ctx, computeDomainCRD); err != nil {
		env.t.Fatalf("installing the ComputeDomain CRD: %v", err)
	}
	client, err := computeDomainClient()
	if err != nil {
		env.t.Fatal(err)
	}
	cd := computeDomain{name: name, template: name + "-channel"}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": computeDomainAPI,
		"kind":       "ComputeDomain",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"numNodes": int64(numNodes),
			"channel":  map[string]any{"resourceClaimTemplate": map[string]any{"name": cd.template}},
		},
	}}
	created, err := client.Namespace(env.ns).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		env.t.Fatalf("creating ComputeDomain %s: %v", name, err)
	}
	cd.uid = string(created.GetUID())

	params, err := json.Marshal(map[string]string{
		"apiVersion":     computeDomainAPI,
		"kind":           "ComputeDomainChannelConfig",
		"domainID":       cd.uid,
		"allocationMode": "Single",
	})
	if err != nil {
		env.t.Fatal(err)
	}
	env.createTemplate(&resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: cd.template, Labels: map[string]string{
			computeDomainLabel:  cd.uid,
			computeDomainTarget: "Workload",
		}},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: channelClassName}}},
			Config: []resourceapi.DeviceClaimConfiguration{{
				Requests: []string{"channel"},
				DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
					Driver:     computeDomainDriver,
					Parameters: runtime.RawExtension{Raw: params},
				}},
			}},
		}}},
	})
	return cd
}

// deleteComputeDomains deletes the namespace's ComputeDomains, if the API
// serves them.
func deleteComputeDomains(ctx context.Context, ns string) error {
	client, err := computeDomainClient()
	if err != nil {
		return err
	}
	err = client.Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// domainGang creates a gang of count whole-tray members that join domain
// cd: each takes the tray's GPUs and a channel of the domain, as the pods
// of NVIDIA's nvbandwidth example do. The user writes no affinity.
func (env *draEnv) domainGang(cd computeDomain, count int) []*v1.Pod {
	return env.namedDomainGang(cd.name, cd, count, nil)
}

// namedDomainGang is domainGang for PodGroup name, with annotations: one
// long-lived domain serves many gangs.
func (env *draEnv) namedDomainGang(name string, cd computeDomain, count int, annotations map[string]string) []*v1.Pod {
	return env.claimGang(name, count, annotations, func(int) []v1.PodResourceClaim {
		return []v1.PodResourceClaim{fromTemplate("gpus", gb200ClaimTemplateName), fromTemplate("channel", cd.template)}
	})
}

// runsDomain labels the nodes as the driver does while domain cd runs
// there (names as given to createNodes; an empty UID removes the label).
func (env *draEnv) runsDomain(uid string, nodes ...string) {
	env.t.Helper()
	for _, n := range nodes {
		env.relabel(n, map[string]string{computeDomainLabel: uid})
	}
}

// domainDevices is what each member of a ComputeDomain gang holds.
var domainDevices = map[string]int{gpuDriver: gb200GPUsPerNode, computeDomainDriver: 1}

// A ComputeDomain's gang must sit inside one NVLink clique, a required
// level the user does not write: while no clique has room for all of it,
// it waits, holding nothing, though the free trays of two cliques would
// hold it; when a tray frees up, it starts in that clique, every member
// with the tray's GPUs and the domain's channel there.
func TestDRAComputeDomainInOneClique(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true), channelClass())
	f := env.createNVLinkFabric(8, 4)
	// Two trays of each clique are busy: four are free, no clique has
	// three.
	busy := env.occupyDevices(gb200ClaimTemplateName, "s0-l0-n0", "s0-l0-n1", "s0-l0-n4", "s0-l0-n5")
	ledger := env.ledgerGangs(partialBindGrace, map[string]int{"ring": 3})
	ring := env.createComputeDomain("ring", 3)
	pods := env.domainGang(ring, 3)
	env.waitForClaimsCreated(pods...)

	env.expectNothingHeld(draWindow, pods...)
	ev := env.waitForEvent("PodGroup", "ring", coscheduling.ReasonTopologyUnsatisfied)
	t.Logf("Event: %s", ev.Note)

	env.deletePods(busy[3]) // s0-l0-n5: clique c1 has three free trays
	nodes := env.waitForBound(bindTimeout, pods...)
	for pod, node := range nodes {
		if f.cliqueOf[node] != "s0-l0-c1" {
			t.Errorf("member %s is on %s in clique %s, want the clique with room, s0-l0-c1", pod, node, f.cliqueOf[node])
		}
	}
	env.expectDevicesOnNodes(nodes, domainDevices, pods...)
	ledger.expectNoHalfBound()
}

// Two ComputeDomains never share a node, and by default not a clique
// either: a domain lands in a clique no other domain runs in, though
// packing would put it beside the first; with every clique taken a third
// domain waits, holding nothing, and starts once a domain ends.
func TestDRAComputeDomainsKeptApart(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true), channelClass())
	f := env.createNVLinkFabric(12, 4) // cliques c0 (n0-n3), c1 (n4-n7), c2 (n8-n11)
	// An earlier domain still runs on n8: its pods finished, the domain
	// and the driver's label remain.
	old := env.createComputeDomain("old", 1)
	env.runsDomain(old.uid, "s0-l0-n8")
	ledger := env.ledgerGangs(partialBindGrace, map[string]int{"a": 2, "b": 2, "c": 2})

	a := env.createComputeDomain("a", 2)
	podsA := env.domainGang(a, 2)
	nodesA := env.waitForBound(bindTimeout, podsA...)
	env.expectDevicesOnNodes(nodesA, domainDevices, podsA...)
	env.runsDomain(a.uid, shortNames(env, nodesA)...)

	b := env.createComputeDomain("b", 2)
	podsB := env.domainGang(b, 2)
	nodesB := env.waitForBound(bindTimeout, podsB...)
	env.expectDevicesOnNodes(nodesB, domainDevices, podsB...)
	env.runsDomain(b.uid, shortNames(env, nodesB)...)

	cliqueA, cliqueB := cliqueOfGang(t, f, "a", nodesA), cliqueOfGang(t, f, "b", nodesB)
	used := sets.New(mapValues(nodesA)...)
	for pod, node := range nodesB {
		if used.Has(node) {
			t.Errorf("domain b's member %s shares node %s with domain a", pod, node)
		}
	}
	for name, clique := range map[string]string{"a": cliqueA, "b": cliqueB} {
		if clique == "s0-l0-c2" {
			t.Errorf("domain %s landed in clique %s, where domain old runs", name, clique)
		}
	}
	if cliqueA == cliqueB {
		t.Errorf("domains a and b share clique %s, while another clique ran no domain", cliqueA)
	}

	// Every clique runs a domain: c waits, holding nothing, though 7 trays
	// are free.
	c := env.createComputeDomain("c", 2)
	podsC := env.domainGang(c, 2)
	env.waitForClaimsCreated(podsC...)
	env.expectNothingHeld(draWindow, podsC...)

	// The old domain ends: the driver takes its label off n8.
	if err := deleteComputeDomain(t, env.ns, old.name); err != nil {
		t.Fatal(err)
	}
	env.runsDomain("", "s0-l0-n8")
	nodesC := env.waitForBound(bindTimeout, podsC...)
	if clique := cliqueOfGang(t, f, "c", nodesC); clique != "s0-l0-c2" {
		t.Errorf("domain c landed in clique %s, want the free one, s0-l0-c2", clique)
	}
	env.expectDevicesOnNodes(nodesC, domainDevices, podsC...)
	ledger.expectNoHalfBound()
}

// A ComputeDomain's gang whose user requires one clique, larger than every
// clique, never starts: it gets a GangTooLarge Event that gives the clique
// sizes, and holds nothing, though the fabric has trays enough for it.
func TestDRAComputeDomainTooLarge(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true), channelClass())
	env.createNVLinkFabric(8, 4) // two cliques of four trays
	wide := env.createComputeDomain("wide", 5)
	pods := env.namedDomainGang(wide.name, wide, 5, map[string]string{"gpu-gang.x-k8s.io/topology-required": cliqueLabel})
	env.waitForClaimsCreated(pods...)

	ev := env.waitForEvent("PodGroup", "wide", coscheduling.ReasonGangTooLarge)
	t.Logf("Event: %s", ev.Note)
	for _, want := range []string{"ComputeDomain " + wide.uid, "no clique holds its 5 members", "the largest of 2 clique(s) has 4 node(s)"} {
		if !strings.Contains(ev.Note, want) {
			t.Errorf("the GangTooLarge Event does not say %q: %s", want, ev.Note)
		}
	}
	env.expectNothingHeld(draWindow, pods...)
}

// A ComputeDomain's gang larger than one clique (a 36-tray job on GB200
// NVL72 racks, scaled down: six members, cliques of four) starts in the
// fewest whole cliques, two, each used by that domain alone: not in the
// clique another domain runs in, and its GangScheduled Event says it spans
// and why.
func TestDRAComputeDomainSpansWholeCliques(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true), channelClass())
	f := env.createNVLinkFabric(16, 4) // cliques c0 (n0-n3), c1, c2, c3 (n12-n15)
	old := env.createComputeDomain("old", 1)
	env.runsDomain(old.uid, "s0-l0-n5") // in c1
	ledger := env.ledgerGangs(partialBindGrace, map[string]int{"wide": 6})

	wide := env.createComputeDomain("wide", 6)
	pods := env.domainGang(wide, 6)
	nodes := env.waitForBound(bindTimeout, pods...)
	env.expectDevicesOnNodes(nodes, domainDevices, pods...)
	perClique := map[string]int{}
	for _, node := range nodes {
		perClique[f.cliqueOf[node]]++
	}
	// c0, c2 and c3 have room for four each: two of them hold six, and the
	// first by name are chosen.
	want := map[string]int{"s0-l0-c0": 4, "s0-l0-c2": 2}
	if len(perClique) != 2 || perClique["s0-l0-c0"]+perClique["s0-l0-c2"] != 6 {
		t.Errorf("domain wide's members per clique: %v, want the fewest free whole cliques, %v", perClique, sets.List(sets.KeySet(want)))
	}
	ev := env.waitForEvent("PodGroup", "wide", coscheduling.ReasonGangScheduled)
	t.Logf("Event: %s", ev.Note)
	for _, s := range []string{"ComputeDomain " + wide.uid + " spans the fewest whole NVLink cliques, 2 (s0-l0-c0, s0-l0-c2), each used by no other ComputeDomain", "no clique has room for its 6 member(s), the roomiest for 4"} {
		if !strings.Contains(ev.Note, s) {
			t.Errorf("the GangScheduled Event does not say %q: %s", s, ev.Note)
		}
	}
	ledger.expectNoHalfBound()
}

// Gangs of one long-lived ComputeDomain (a batch queue sharing it) grow
// into free cliques: with the domain's first clique almost full, two
// 3-member gangs created together both start, each in a free clique of
// its own, though the domain already runs in the first.
func TestDRAComputeDomainGrowsIntoFreeCliques(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true), channelClass())
	f := env.createNVLinkFabric(12, 4) // cliques c0 (n0-n3), c1 (n4-n7), c2 (n8-n11)
	shared := env.createComputeDomain("shared", 8)
	ledger := env.ledgerGangs(partialBindGrace, map[string]int{"first": 2, "job-a": 3, "job-b": 3})

	first := env.namedDomainGang("first", shared, 2, nil)
	firstNodes := env.waitForBound(bindTimeout, first...)
	env.runsDomain(shared.uid, shortNames(env, firstNodes)...)
	home := cliqueOfGang(t, f, "first", firstNodes)

	a := env.namedDomainGang("job-a", shared, 3, nil)
	b := env.namedDomainGang("job-b", shared, 3, nil)
	nodesA := env.waitForBound(bindTimeout, a...)
	nodesB := env.waitForBound(bindTimeout, b...)
	env.expectDevicesOnNodes(nodesA, domainDevices, a...)
	env.expectDevicesOnNodes(nodesB, domainDevices, b...)
	cliqueA, cliqueB := cliqueOfGang(t, f, "job-a", nodesA), cliqueOfGang(t, f, "job-b", nodesB)
	if cliqueA == home || cliqueB == home || cliqueA == cliqueB {
		t.Errorf("the domain's gangs are in cliques %s (first), %s (job-a), %s (job-b); want the two free cliques, one each", home, cliqueA, cliqueB)
	}
	ledger.expectNoHalfBound()
}

// The driver's IMEX daemon claim (made from its controller's
// computedomain-daemon-<UID> template: the daemon DeviceClass and a
// ComputeDomainDaemonConfig naming the domain) counts as its domain: the
// domain's gang prefers the clique its daemon runs in, and another
// domain's gang keeps out of that clique. It creates no domain of its own.
func TestDRAComputeDomainDaemonIsItsDomain(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true), channelClass(), deviceClass(daemonClassName, daemonClassSelector))
	f := env.createNVLinkFabric(8, 4) // cliques c0 (n0-n3), c1 (n4-n7)
	a := env.createComputeDomain("a", 2)
	b := env.createComputeDomain("b", 2)
	ledger := env.ledgerGangs(partialBindGrace, map[string]int{"a": 2, "b": 2})

	daemonTemplate := "computedomain-daemon-" + a.uid
	params, err := json.Marshal(map[string]string{"apiVersion": computeDomainAPI, "kind": "ComputeDomainDaemonConfig", "domainID": a.uid})
	if err != nil {
		t.Fatal(err)
	}
	env.createTemplate(&resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: daemonTemplate, Labels: map[string]string{computeDomainLabel: a.uid, computeDomainTarget: "Daemon"}},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "daemon", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: daemonClassName}}},
			Config: []resourceapi.DeviceClaimConfiguration{{
				Requests: []string{"daemon"},
				DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
					Driver: computeDomainDriver, Parameters: runtime.RawExtension{Raw: params},
				}},
			}},
		}}},
	})
	// The daemon's pod, as the driver's DaemonSet runs it on a node of
	// the domain: labelled with the domain, on s0-l0-n5 in c1.
	daemon := env.claimPod("computedomain-daemon-a", fromTemplate("compute-domain-daemon", daemonTemplate))
	daemon.Labels = map[string]string{computeDomainLabel: a.uid}
	daemon.Spec.NodeSelector = map[string]string{v1.LabelHostname: env.nodeName("s0-l0-n5")}
	env.createPods(daemon)
	env.waitForBound(bindTimeout, daemon)
	env.waitForAllocated(1, daemon)

	podsA := env.domainGang(a, 2)
	nodesA := env.waitForBound(bindTimeout, podsA...)
	if clique := cliqueOfGang(t, f, "a", nodesA); clique != "s0-l0-c1" {
		t.Errorf("domain a landed in clique %s, want s0-l0-c1, where its daemon runs", clique)
	}
	podsB := env.domainGang(b, 2)
	nodesB := env.waitForBound(bindTimeout, podsB...)
	if clique := cliqueOfGang(t, f, "b", nodesB); clique != "s0-l0-c0" {
		t.Errorf("domain b landed in clique %s, want s0-l0-c0: c1 runs domain a's daemon", clique)
	}
	env.expectDevicesOnNodes(nodesA, domainDevices, podsA...)
	env.expectDevicesOnNodes(nodesB, domainDevices, podsB...)
	ledger.expectNoHalfBound()
}

func deleteComputeDomain(t *testing.T, ns, name string) error {
	client, err := computeDomainClient()
	if err != nil {
		return err
	}
	if err := client.Namespace(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting ComputeDomain %s: %w", name, err)
	}
	return nil
}

// cliqueOfGang returns the one clique a gang's members are in, failing the
// test if they are in several.
func cliqueOfGang(t *testing.T, f *fabric, name string, nodes map[string]string) string {
	t.Helper()
	cliques := sets.New[string]()
	for _, node := range nodes {
		cliques.Insert(f.cliqueOf[node])
	}
	if cliques.Len() != 1 {
		t.Errorf("domain %s spans cliques %v: %v", name, sets.List(cliques), nodes)
	}
	return sets.List(cliques)[0]
}

// shortNames returns the names createNodes was given for the nodes the
// pods are bound to.
func shortNames(env *draEnv, nodes map[string]string) []string {
	var out []string
	for _, n := range sets.List(sets.New(mapValues(nodes)...)) {
		out = append(out, n[len(env.nodeName("")):])
	}
	return out
}
