package contract

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// A stand-in carries the demand of the pod recorded for it, and only of
// that pod: a state reused for another pod does not lend it a demand.
func TestDemandPod(t *testing.T) {
	member := st.MakePod().Namespace("ns").Name("m").UID("m").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "8"}).Obj()
	standIn := st.MakePod().Namespace("ns").Name("m").UID("m").Obj()
	other := st.MakePod().Namespace("ns").Name("o").UID("o").Obj()

	cs := framework.NewCycleState()
	require.Same(t, standIn, DemandPod(cs, standIn), "no pod recorded")
	WithDemandPod(cs, member)
	require.Same(t, member, DemandPod(cs, standIn))
	require.Same(t, member, DemandPod(cs.Clone(), standIn), "a clone keeps it")
	require.Same(t, other, DemandPod(cs, other), "another pod's")
}
