package snapshot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
)

// Command is how to take a snapshot; errors name it. It names the PodGroup
// resource with its group: a cluster that also serves Kubernetes' own
// PodGroups would otherwise list those in their place.
const Command = "kubectl get nodes,pods,podgroups.scheduling.x-k8s.io -A -o yaml"

// NativeCommand is Command for a cluster that serves Kubernetes' own
// PodGroups (scheduling.k8s.io/v1beta1) too; kubectl fails on a cluster
// that does not.
const NativeCommand = "kubectl get nodes,pods,podgroups.scheduling.x-k8s.io,podgroups.scheduling.k8s.io -A -o yaml"

// Snapshot is what the simulator needs from a cluster's state.
type Snapshot struct {
	// Source names where the snapshot came from.
	Source string
	// Nodes are the nodes with GPUs, in the order listed.
	Nodes []Node
	// Bound are GPU pods bound to a node and not finished.
	Bound []BoundPod
	// Gangs are PodGroups, of either API, with pending members that ask
	// for GPUs, and Pending the other pending pods that do; both in
	// creation order.
	Gangs   []Gang
	Pending []Pod
	// DRA are the Dynamic Resource Allocation objects listed.
	DRA DRA
	// Notes say what was left out, and why.
	Notes []string
}

// Node is one node with GPUs.
type Node struct {
	Name   string
	Labels map[string]string
	// GPUs is its allocatable nvidia.com/gpu, or on a DRA node the whole
	// GPUs its ResourceSlices publish.
	GPUs int
	// DRA is set on a node that publishes its GPUs through NVIDIA's DRA
	// driver and advertises no nvidia.com/gpu; Hardware is what its
	// devices say they are (see replay).
	DRA      bool
	Hardware fabric.Hardware
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
	// Claims is set when its GPUs come through its ResourceClaims.
	Claims   bool
	Priority int32
	Created  time.Time
}

// Gang is a PodGroup with pending members, read as the scheduler reads it
// (pkg/gang).
type Gang struct {
	// Key names the PodGroup and its API.
	Key gang.Key
	// MinMember is the gang's quorum.
	MinMember int32
	// Members are its pending members that ask for GPUs, by name.
	Members []Pod
	// Policy is its topology policy (gang.PolicyOf): a native PodGroup's
	// topology constraint, the PodGroup's annotations, or Kueue's on its
	// first member.
	Policy  placement.Policy
	Created time.Time
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
	var groups []*gang.Spec
	for _, it := range items {
		switch it.kind {
		case "v1 Node":
			if n := decode[v1.Node](it, &errs); n != nil {
				nodes = append(nodes, n)
			}
		case "v1 Pod":
			if p := decode[v1.Pod](it, &errs); p != nil {
				pods = append(pods, p)
			}
		case v1alpha1.SchemeGroupVersion.String() + " PodGroup":
			if g := decode[v1alpha1.PodGroup](it, &errs); g != nil {
				groups = append(groups, gang.FromPodGroup(g))
			}
		case schedulingv1beta1.SchemeGroupVersion.String() + " PodGroup":
			if g := decode[schedulingv1beta1.PodGroup](it, &errs); g != nil {
				groups = append(groups, gang.FromNativePodGroup(g))
			}
		default:
			if !s.DRA.read(it, &errs) {
				errs = append(errs, fmt.Errorf("%s: a snapshot holds only v1 Nodes, v1 Pods, PodGroups of %s or %s and DRA objects, not %s; take it with: %s",
					it.where, v1alpha1.SchemeGroupVersion, schedulingv1beta1.SchemeGroupVersion, it.kind, Command))
			}
		}
	}
	dra := newReplay(&s.DRA)
	errs = append(errs, s.readNodes(nodes, dra)...)
	errs = append(errs, s.readPods(pods, groups, dra)...)
	s.Notes = append(s.Notes, dra.notes()...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(s.Nodes) == 0 {
		return nil, fmt.Errorf("no node has allocatable %s or publishes GPUs of %s through ResourceSlices; the simulator places GPU pods only", fabric.GPU, scheduling.DRADriverGPU)
	}
	if len(s.Gangs) == 0 && len(s.Pending) == 0 {
		return nil, fmt.Errorf("no pending pod asks for %s or claims GPUs: there is nothing to schedule; take the snapshot while jobs wait", fabric.GPU)
	}
	return s, nil
}

// decode reads an item as a T, or adds to errs why it is not one.
func decode[T any](it item, errs *[]error) *T {
	obj := new(T)
	if err := yaml.Unmarshal(it.raw, obj); err != nil {
		*errs = append(*errs, fmt.Errorf("%s: not a %s: %w", it.where, it.kind, err))
		return nil
	}
	return obj
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
