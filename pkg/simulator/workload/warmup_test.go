package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	pgfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"
)

func TestWarmUp(t *testing.T) {
	t.Run("native PodGroup: deleted, then its finalizers lifted", func(t *testing.T) {
		kube := fake.NewClientset()
		s := &Submitter{Kube: kube, Groups: pgfake.NewSimpleClientset(), Builder: &Builder{Namespace: "sim", Flavor: Native}}
		require.NoError(t, s.WarmUp(t.Context()))
		var verbs []string
		for _, a := range kube.Actions() {
			verbs = append(verbs, a.GetVerb())
			if p, ok := a.(k8stesting.PatchAction); ok {
				require.Equal(t, types.MergePatchType, p.GetPatchType())
				require.JSONEq(t, `{"metadata":{"finalizers":null}}`, string(p.GetPatch()))
			}
		}
		require.Equal(t, []string{"create", "delete", "patch"}, verbs)
	})
	t.Run("gpu-gang PodGroup", func(t *testing.T) {
		groups := pgfake.NewSimpleClientset()
		s := &Submitter{Kube: fake.NewClientset(), Groups: groups, Builder: &Builder{Namespace: "sim", Flavor: GangPlugin}}
		require.NoError(t, s.WarmUp(t.Context()))
		require.Len(t, groups.Actions(), 2)
		list, err := groups.SchedulingV1alpha1().PodGroups("sim").List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		require.Empty(t, list.Items)
	})
	t.Run("plain: nothing to warm", func(t *testing.T) {
		kube := fake.NewClientset()
		s := &Submitter{Kube: kube, Builder: &Builder{Namespace: "sim", Flavor: Plain}}
		require.NoError(t, s.WarmUp(t.Context()))
		require.Empty(t, kube.Actions())
	})
}
