package capacity

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Amounts maps a resource to a quantity in the scheduler's units.
// TEMPORARY: replaced by the reshape's amounts.go at merge.
type Amounts map[v1.ResourceName]int64

func sortedNames(a Amounts) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(a))
	for name := range a {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
