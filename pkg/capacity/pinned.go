package capacity

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// PinnedClaim is an allocated claim of a pod whose devices only some nodes
// reach: its allocation's nodeSelector names them. The pod asks for nothing
// more of it (its devices are taken), but it can run only on those nodes.
// DynamicResources enforces this in its Filter alone, which a planner that
// counts the pod's other devices itself may skip: the planner must then
// keep the pod on the claim's nodes by itself.
type PinnedClaim struct {
	Name     types.NamespacedName
	selector *nodeaffinity.NodeSelector
	// nodes describes the selector for people.
	nodes string
}

// pinnedClaim returns the pin of an allocated claim, nil when its devices
// are reachable from every node (no nodeSelector).
func pinnedClaim(claim *resourceapi.ResourceClaim, alloc *resourceapi.AllocationResult) (*PinnedClaim, error) {
	if alloc.NodeSelector == nil {
		return nil, nil
	}
	sel, err := nodeaffinity.NewNodeSelector(alloc.NodeSelector)
	if err != nil {
		return nil, fmt.Errorf("ResourceClaim %s/%s: the allocation's nodeSelector: %w", claim.Namespace, claim.Name, err)
	}
	return &PinnedClaim{
		Name:     types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name},
		selector: sel,
		nodes:    describeNodeSelector(alloc.NodeSelector),
	}, nil
}

// Reaches reports whether node reaches the claim's devices.
func (p *PinnedClaim) Reaches(node *v1.Node) bool { return p.selector.Match(node) }

// Nodes names, for people, the nodes that reach the claim's devices:
// "node n1", "nodes n1, n2", or the selector's words.
func (p *PinnedClaim) Nodes() string { return p.nodes }

// Describe says, for people, which nodes the claim's devices are on:
// "ResourceClaim ns/name is allocated to devices of node n1".
func (p *PinnedClaim) Describe() string {
	return fmt.Sprintf("ResourceClaim %s is allocated to devices of %s", p.Name, p.nodes)
}

// describeNodeSelector names the nodes of an allocation's nodeSelector as
// drivers write it for node-local devices (a term per node, each
// metadata.name In [node]), and speaks of the selector otherwise.
func describeNodeSelector(ns *v1.NodeSelector) string {
	var names []string
	for _, term := range ns.NodeSelectorTerms {
		if len(term.MatchExpressions) > 0 || len(term.MatchFields) != 1 {
			return selectorWords
		}
		f := term.MatchFields[0]
		if f.Key != "metadata.name" || f.Operator != v1.NodeSelectorOpIn || len(f.Values) != 1 {
			return selectorWords
		}
		names = append(names, f.Values[0])
	}
	switch len(names) {
	case 0:
		return selectorWords
	case 1:
		return "node " + names[0]
	}
	return "nodes " + strings.Join(names, ", ")
}

// selectorWords stand for a nodeSelector whose nodes cannot be listed.
const selectorWords = "the nodes its allocation's nodeSelector selects"
