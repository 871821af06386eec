package fleet

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Every annotation AnnotationKeys lists is one ParseRequirements reads: a
// bad value under it is reported.
func TestAnnotationKeysAreRead(t *testing.T) {
	for _, k := range AnnotationKeys() {
		_, err := ParseRequirements(nil, map[string]string{k: "not valid at all,,"})
		var ae *AnnotationError
		require.ErrorAs(t, err, &ae, "annotation %s", k)
		require.Equal(t, k, ae.Annotation)
	}
}

// Requirements with equal GroupPolicy give every node the same key, and the
// policy drops what GroupKey does not read.
func TestGroupPolicy(t *testing.T) {
	labels := map[string]string{scheduling.LabelGPUProduct: "H100", scheduling.LabelCUDADriverVersionFull: "550.54.15", scheduling.LabelKarpenterCapacityType: "spot"}
	f := ReadNode(labels, nil)
	a := DefaultRequirements()
	b := DefaultRequirements()
	b.MinCUDA, b.AllowSharedGPUs = mustParseVersion("12.4"), true
	require.Equal(t, a.GroupPolicy(), b.GroupPolicy())
	require.Equal(t, a.GroupKey(labels, &f), b.GroupKey(labels, &f))

	spot, onDemand := DefaultRequirements(), DefaultRequirements()
	spot.Capacity, onDemand.Capacity = CapacityPolicySpot, CapacityPolicyOnDemand
	require.Equal(t, spot.GroupPolicy(), onDemand.GroupPolicy(), "a forced capacity type is Admits', not the groups'")
	require.Equal(t, spot.GroupKey(labels, &f), onDemand.GroupKey(labels, &f))
	require.NotEqual(t, a.GroupPolicy(), spot.GroupPolicy())
	require.NotEqual(t, a.GroupKey(labels, &f), spot.GroupKey(labels, &f))
}
