package fleet

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// GroupKey identifies a node's uniform group for one gang: the node's values
// of the gang's uniform keys, followed by its capacity type when the gang's
// capacity policy is uniform. All GPU members of a gang go to nodes of one
// group. Keys compare with ==; they are only meaningful among keys built
// from the same Requirements.
//
// A node that lacks one of the keys is in the group of nodes that lack it
// (and agree on the other keys): "unset" is a value of its own, never equal
// to a real one. A gang thus never mixes a labelled node with an unlabelled
// one, while a cluster without GPU feature discovery or DRA devices is one
// group, as if there were no rule.
//
// Where a node has no nvidia.com/gpu.product or driver label, its devices'
// productName and driverVersion stand in for them (ReadNodeDevices). A
// value read from devices is never equal to one read from a label: GPU
// feature discovery spells products its own way (dashes for spaces, a
// suffix for shared GPUs), so equal GPUs would not match anyway, and a
// gang's members reach their GPUs one way, through the device plugin or
// through DRA. A node whose devices disagree (two products or drivers) has
// all of their values in its key, so it is in a group of its own kind,
// never taken for a node of one of them.
type GroupKey struct {
	// enc holds each component as '-' (unset), '=' and the quoted value
	// (a label), or '@', the quoted attribute and the quoted values (a
	// device attribute). Quoting makes it unambiguous whatever the values
	// hold.
	enc string
	// text is the key for people, built from the same components.
	text string
	// devices is set when some component was read from device attributes.
	devices bool
}

// groupValue is one component of a GroupKey.
type groupValue struct {
	// Key is the uniform key, or "capacity type".
	Key string
	// Value is the node's value; "" when unset or read from devices.
	Value string
	// Set is false when the node lacks the key.
	Set bool
	// Attr is the device attribute the value was read from, "" for a
	// label; Values are the distinct values the node's devices hold.
	Attr   string
	Values []string
}

// capacityComponent names the capacity-type component of a GroupKey.
const capacityComponent = "capacity type"

// GroupKey returns the node's group for a gang with requirements r, from the
// node's labels and facts.
func (r Requirements) GroupKey(labels map[string]string, f *NodeFacts) GroupKey {
	return groupKeyOf(r.groupValues(labels, f))
}

// GroupPolicy returns the part of r that GroupKey reads: requirements with
// equal GroupPolicy give every node the same key, so callers may keep keys
// per node across gangs that ask for the same grouping.
func (r Requirements) GroupPolicy() Requirements {
	p := Requirements{Uniform: r.Uniform}
	if r.Capacity == CapacityPolicyUniform {
		p.Capacity = CapacityPolicyUniform
	}
	return p
}

func (r Requirements) groupValues(labels map[string]string, f *NodeFacts) []groupValue {
	keys := r.Uniform.Keys()
	vals := make([]groupValue, 0, len(keys)+1)
	for _, key := range keys {
		v := groupValue{Key: key}
		switch {
		case key == scheduling.UniformKeyDriverMajorMinor && f.fromDevices.has(factDriver):
			v.Attr, v.Values, v.Set = AttributeName(scheduling.DeviceAttributeDriverVersion), f.Devices.DriverMajorMinors, true
		case key == scheduling.UniformKeyDriverMajorMinor:
			if !f.Driver.IsZero() {
				// Numeric, so that "550.054" and "550.54" are one driver.
				v.Value, v.Set = majorMinor(f.Driver), true
			}
		case labels[key] != "":
			v.Value, v.Set = labels[key], true
		case key == scheduling.LabelGPUProduct && f.fromDevices.has(factProduct):
			v.Attr, v.Values, v.Set = AttributeName(scheduling.DeviceAttributeProductName), f.Devices.Products, true
		}
		vals = append(vals, v)
	}
	if r.Capacity == CapacityPolicyUniform {
		vals = append(vals, groupValue{Key: capacityComponent, Value: string(f.Capacity), Set: true})
	}
	return vals
}

func groupKeyOf(vals []groupValue) GroupKey {
	var enc, text strings.Builder
	devices := false
	for i, v := range vals {
		if i > 0 {
			text.WriteString(", ")
		}
		if v.Attr != "" {
			devices = true
			writeDeviceValue(&enc, &text, v)
			continue
		}
		if !v.Set {
			enc.WriteByte('-')
			if v.Key == scheduling.UniformKeyDriverMajorMinor {
				text.WriteString("driver unset")
			} else {
				text.WriteString(v.Key + " unset")
			}
			continue
		}
		enc.WriteByte('=')
		enc.WriteString(strconv.Quote(v.Value))
		if v.Key == scheduling.UniformKeyDriverMajorMinor {
			text.WriteString("driver " + v.Value)
		} else if v.Key == capacityComponent {
			text.WriteString(v.Value + " capacity")
		} else {
			text.WriteString(v.Key + "=" + v.Value)
		}
	}
	if len(vals) == 0 {
		text.WriteString("all nodes")
	}
	return GroupKey{enc: enc.String(), text: text.String(), devices: devices}
}

// writeDeviceValue writes a component read from device attributes, such as
// "gpu.nvidia.com/productName=NVIDIA H100 80GB HBM3" or, for a node whose
// devices disagree, "driver 535.104 | 550.54 (gpu.nvidia.com/driverVersion,
// mixed)".
func writeDeviceValue(enc, text *strings.Builder, v groupValue) {
	enc.WriteByte('@')
	enc.WriteString(strconv.Quote(v.Attr))
	for _, x := range v.Values {
		enc.WriteString(strconv.Quote(x))
	}
	values := strings.Join(v.Values, " | ")
	mixed := ""
	if len(v.Values) > 1 {
		mixed = "mixed"
	}
	if v.Key == scheduling.UniformKeyDriverMajorMinor {
		text.WriteString("driver " + values + " (" + v.Attr)
		if mixed != "" {
			text.WriteString(", " + mixed)
		}
		text.WriteString(")")
		return
	}
	text.WriteString(v.Attr + "=" + values)
	if mixed != "" {
		text.WriteString(" (" + mixed + ")")
	}
}

// FromDevices reports whether some of the node's values in the key were
// read from device attributes rather than labels.
func (k GroupKey) FromDevices() bool { return k.devices }

// String describes the group for people, such as
// "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, driver 550.54, spot capacity".
func (k GroupKey) String() string { return k.text }

// Compare orders keys, deterministically and independently of any node
// order: by their components in turn, unset before set, values as strings.
func (k GroupKey) Compare(o GroupKey) int { return strings.Compare(k.enc, o.enc) }

// Grouping partitions a node set into the uniform groups of one gang. The
// planner treats a group as an extra, outermost domain: it places the
// gang's GPU members inside the best group that holds them, by the same
// rules it picks any domain, and never across groups.
type Grouping struct {
	// Of[i] is the index in Groups of node i's group.
	Of []int
	// Groups are in GroupKey order.
	Groups []Group
}

// Group is one uniform group.
type Group struct {
	Key GroupKey
	// Nodes are the indices of its nodes, ascending.
	Nodes []int
}

// Trivial reports whether every node is in one group, so that grouping
// constrains nothing.
func (g *Grouping) Trivial() bool { return len(g.Groups) <= 1 }

// NewGrouping partitions nodes by their keys: keys[i] is node i's, as
// Requirements.GroupKey gives it (the GPUFleet plugin caches each node's
// facts and keys node by node).
func NewGrouping(keys []GroupKey) *Grouping {
	index := make(map[GroupKey]int, 8)
	var groups []Group
	for i, k := range keys {
		gi, ok := index[k]
		if !ok {
			gi = len(groups)
			index[k] = gi
			groups = append(groups, Group{Key: k})
		}
		groups[gi].Nodes = append(groups[gi].Nodes, i)
	}
	// Order groups by key, then renumber: the order must not depend on
	// which node came first.
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return groups[a].Key.Compare(groups[b].Key) })
	out := &Grouping{Of: make([]int, len(keys)), Groups: make([]Group, len(groups))}
	for newIdx, old := range order {
		out.Groups[newIdx] = groups[old]
		for _, n := range groups[old].Nodes {
			out.Of[n] = newIdx
		}
	}
	return out
}
