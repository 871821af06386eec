package snapshot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
)

// Command is how to take a snapshot; errors name it.
const Command = "kubectl get nodes,pods,podgroups -A -o yaml"

// Snapshot is what the simulator needs from a cluster's state.
type Snapshot struct {
	// Source names where the snapshot came from.
	Source string
	// Nodes are the nodes with GPUs, in the order listed.
	Nodes []Node
	// Bound are GPU pods bound to a node and not finished.
	Bound []BoundPod
	// Gangs are PodGroups with pending members that ask for GPUs, and
	// Pending the other pending pods that do; both in creation order.
	Gangs   []Gang
	Pending []Pod
	// Notes say what was left out, and why.
	Notes []string
}

// Node is one node with GPUs.
type Node struct {
	Name   string
	Labels map[string]string
	// GPUs is its allocatable nvidia.com/gpu.
	GPUs int
}

// BoundPod is a GPU pod on a node.
type BoundPod struct {
	Namespace, Name, Node string
	GPUs                  int
}

// Pod is a pending pod that asks for GPUs.
type Pod struct {
	Namespace, Name string
	GPUs            int
	Priority        int32
	Created         time.Time
}

// Gang is a PodGroup with pending members.
type Gang struct {
	Namespace, Name string
	// MinMember is the PodGroup's.
	MinMember int32
	// Members are its pending members that ask for GPUs, by name.
	Members []Pod
	// Annotations are the PodGroup's, for its topology policy.
	Annotations map[string]string
	Created     time.Time
}

// Load reads a snapshot file.
func Load(path string) (*Snapshot, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", path, err)
	}
	s.Source = path
	return s, nil
}

// item is one object of the snapshot, with where it came from.
type item struct {
	where string
	raw   []byte
	kind  string
}

// Parse reads a snapshot: a v1 List, or a YAML stream of Lists and
// objects, as kubectl prints them. It reports every problem it finds, one
// error per object, each naming the object and what to do.
func Parse(data []byte) (*Snapshot, error) {
	items, err := split(data)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{}
	var errs []error
	var nodes []*v1.Node
	var pods []*v1.Pod
	var groups []*v1alpha1.PodGroup
	for _, it := range items {
		switch it.kind {
		case "v1 Node":
			n := &v1.Node{}
			if err := yaml.Unmarshal(it.raw, n); err != nil {
				errs = append(errs, fmt.Errorf("%s: not a Node: %w", it.where, err))
				continue
			}
			nodes = append(nodes, n)
		case "v1 Pod":
			p := &v1.Pod{}
			if err := yaml.Unmarshal(it.raw, p); err != nil {
				errs = append(errs, fmt.Errorf("%s: not a Pod: %w", it.where, err))
				continue
			}
			pods = append(pods, p)
		case v1alpha1.SchemeGroupVersion.String() + " PodGroup":
			g := &v1alpha1.PodGroup{}
			if err := yaml.Unmarshal(it.raw, g); err != nil {
				errs = append(errs, fmt.Errorf("%s: not a PodGroup: %w", it.where, err))
				continue
			}
			groups = append(groups, g)
		default:
			errs = append(errs, fmt.Errorf("%s: a snapshot holds only v1 Nodes, v1 Pods and %s PodGroups, not %s; take it with: %s",
				it.where, v1alpha1.SchemeGroupVersion, it.kind, Command))
		}
	}
	errs = append(errs, s.readNodes(nodes)...)
	errs = append(errs, s.readPods(pods, groups)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(s.Nodes) == 0 {
		return nil, fmt.Errorf("no node has allocatable %s; the simulator places GPU pods only", fabric.GPU)
	}
	if len(s.Gangs) == 0 && len(s.Pending) == 0 {
		return nil, fmt.Errorf("no pending pod asks for %s: there is nothing to schedule; take the snapshot while jobs wait", fabric.GPU)
	}
	return s, nil
}

// split finds the objects of a List or of a stream of objects and Lists.
func split(data []byte) ([]item, error) {
	var items []item
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 0; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		var head struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Items      []json.RawMessage `json:"items"`
		}
		if err := yaml.Unmarshal(raw, &head); err != nil {
			return nil, fmt.Errorf("document %d is not YAML or JSON: %w", doc, err)
		}
		switch {
		case head.APIVersion == "" && head.Kind == "" && len(head.Items) == 0:
			if len(bytes.TrimSpace(raw)) > 0 && !isComment(raw) {
				return nil, fmt.Errorf("document %d has no apiVersion and kind; a snapshot is what %s prints", doc, Command)
			}
		case head.Kind == "List" || strings.HasSuffix(head.Kind, "List"):
			for i, it := range head.Items {
				k, err := kindOf(it)
				where := fmt.Sprintf("document %d, items[%d]", doc, i)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", where, err)
				}
				items = append(items, item{where: where + describe(it), raw: it, kind: k})
			}
		default:
			j, err := yaml.YAMLToJSON(raw)
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
			k, err := kindOf(j)
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
			items = append(items, item{where: fmt.Sprintf("document %d%s", doc, describe(j)), raw: j, kind: k})
		}
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("no objects; a snapshot is what %s prints", Command)
	}
	return items, nil
}

func isComment(raw []byte) bool {
	for _, line := range strings.Split(string(raw), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}

// kindOf reads "apiVersion Kind" of an object.
func kindOf(raw []byte) (string, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		return "", err
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return "", fmt.Errorf("an object without apiVersion or kind; a snapshot is what %s prints", Command)
	}
	return tm.APIVersion + " " + tm.Kind, nil
}

// describe names an object for errors: " (Pod ns/name)".
func describe(raw []byte) string {
	var o struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(raw, &o) != nil || o.Metadata.Name == "" {
		return ""
	}
	name := o.Metadata.Name
	if o.Metadata.Namespace != "" {
		name = o.Metadata.Namespace + "/" + name
	}
	return fmt.Sprintf(" (%s %s)", o.Kind, name)
}

// readNodes keeps the nodes with GPUs.
func (s *Snapshot) readNodes(nodes []*v1.Node) []error {
	var errs []error
	seen := map[string]bool{}
	cpuOnly := 0
	for _, n := range nodes {
		switch {
		case n.Name == "":
			errs = append(errs, errors.New("a Node has no metadata.name"))
			continue
		case seen[n.Name]:
			errs = append(errs, fmt.Errorf("Node %s is listed twice", n.Name))
			continue
		case n.Status.Allocatable == nil:
			errs = append(errs, fmt.Errorf("Node %s has no status.allocatable; take the snapshot with %s, which prints status", n.Name, Command))
			continue
		}
		seen[n.Name] = true
		gpus := n.Status.Allocatable.Name(fabric.GPU, "").Value()
		if gpus <= 0 {
			cpuOnly++
			continue
		}
		labels := n.Labels
		if labels == nil {
			labels = map[string]string{}
		}
		s.Nodes = append(s.Nodes, Node{Name: n.Name, Labels: labels, GPUs: int(gpus)})
	}
	if cpuOnly > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d nodes without %s", cpuOnly, fabric.GPU))
	}
	return errs
}

// readPods sorts pods into bound, gang members and plain pending pods.
func (s *Snapshot) readPods(pods []*v1.Pod, groups []*v1alpha1.PodGroup) []error {
	var errs []error
	gpuNodes := map[string]bool{}
	for _, n := range s.Nodes {
		gpuNodes[n.Name] = true
	}
	gangs := map[string]*Gang{}
	for _, g := range groups {
		key := g.Namespace + "/" + g.Name
		switch {
		case g.Name == "" || g.Namespace == "":
			errs = append(errs, fmt.Errorf("a PodGroup has no metadata.name or metadata.namespace"))
			continue
		case g.Spec.MinMember < 1:
			errs = append(errs, fmt.Errorf("PodGroup %s has spec.minMember %d; it must be at least 1", key, g.Spec.MinMember))
			continue
		}
		gangs[key] = &Gang{Namespace: g.Namespace, Name: g.Name, MinMember: g.Spec.MinMember, Annotations: g.Annotations, Created: g.CreationTimestamp.Time}
	}
	var cpuOnly, finished, dropped int
	for _, p := range pods {
		if p.Name == "" || p.Namespace == "" {
			errs = append(errs, errors.New("a Pod has no metadata.name or metadata.namespace"))
			continue
		}
		key := p.Namespace + "/" + p.Name
		if len(p.Spec.Containers) == 0 {
			errs = append(errs, fmt.Errorf("Pod %s has no spec.containers; take the snapshot with %s", key, Command))
			continue
		}
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed || p.DeletionTimestamp != nil {
			finished++
			continue
		}
		gpus := GPUsOf(p)
		if p.Spec.NodeName != "" {
			if gpus == 0 {
				cpuOnly++
				continue
			}
			if !gpuNodes[p.Spec.NodeName] {
				errs = append(errs, fmt.Errorf("Pod %s runs on node %s, which the snapshot does not hold with %s; take nodes and pods in one snapshot: %s",
					key, p.Spec.NodeName, fabric.GPU, Command))
				continue
			}
			s.Bound = append(s.Bound, BoundPod{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, GPUs: gpus})
			continue
		}
		pod := Pod{Namespace: p.Namespace, Name: p.Name, GPUs: gpus, Created: p.CreationTimestamp.Time}
		if p.Spec.Priority != nil {
			pod.Priority = *p.Spec.Priority
		}
		if group, ok := p.Labels[scheduling.PodGroupLabel]; ok {
			g := gangs[p.Namespace+"/"+group]
			if g == nil {
				errs = append(errs, fmt.Errorf("Pod %s joins PodGroup %s/%s, which the snapshot does not hold; include podgroups: %s",
					key, p.Namespace, group, Command))
				continue
			}
			if gpus == 0 {
				dropped++
				continue
			}
			g.Members = append(g.Members, pod)
			continue
		}
		if gpus == 0 {
			cpuOnly++
			continue
		}
		s.Pending = append(s.Pending, pod)
	}
	for _, g := range gangs {
		if len(g.Members) > 0 {
			slices.SortFunc(g.Members, func(a, b Pod) int { return strings.Compare(a.Name, b.Name) })
			s.Gangs = append(s.Gangs, *g)
		}
	}
	slices.SortFunc(s.Gangs, func(a, b Gang) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	slices.SortStableFunc(s.Pending, func(a, b Pod) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	if cpuOnly > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d pods without %s", cpuOnly, fabric.GPU))
	}
	if dropped > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d pending gang members without %s (launchers, say), from their gangs", dropped, fabric.GPU))
	}
	if finished > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d finished or terminating pods", finished))
	}
	return errs
}

// GPUsOf is the pod's nvidia.com/gpu request: its containers' requests
// (or limits, which set requests for extended resources) added up, or its
// largest init container's, whichever is more.
func GPUsOf(p *v1.Pod) int {
	get := func(c v1.Container) int64 {
		if q, ok := c.Resources.Requests[fabric.GPU]; ok {
			return q.Value()
		}
		if q, ok := c.Resources.Limits[fabric.GPU]; ok {
			return q.Value()
		}
		return 0
	}
	var sum, init int64
	for _, c := range p.Spec.Containers {
		sum += get(c)
	}
	for _, c := range p.Spec.InitContainers {
		init = max(init, get(c))
	}
	return int(max(sum, init))
}
