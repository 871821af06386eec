package ledger

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func pod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid")}}
}

func TestGateHoldsAndReleases(t *testing.T) {
	for _, tt := range []struct {
		name string
		// raced releases the gang between the read of the count and Hold.
		raced bool
	}{
		{name: "no release in between"},
		{name: "a release in between is reported", raced: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGate()
			k := key("job")
			seen := g.Releases(k)
			if tt.raced {
				g.Release(k)
			}
			require.Equal(t, !tt.raced, g.Hold(k, pod("a"), seen))
			g.Hold(k, pod("b"), g.Releases(k))
			require.Equal(t, 2, g.Held(k))
			require.Equal(t, 1, g.Gangs())

			g.drop(k, "a-uid")
			require.Equal(t, 1, g.Held(k))
			released := g.Release(k)
			require.Equal(t, []string{"ns/b"}, keysOf(released))
			require.Zero(t, g.Gangs())
			require.Nil(t, g.Release(k), "nothing left to release")
			require.False(t, g.Hold(k, pod("c"), seen), "two releases since")
		})
	}
}

func TestBlockedIsBounded(t *testing.T) {
	b := NewBlocked()
	require.Nil(t, b.Take())
	for i := range MaxBlocked + 5 {
		b.Add(pod(fmt.Sprint("p", i)))
	}
	require.Len(t, b.Take(), MaxBlocked)
	require.Nil(t, b.Take(), "taken once")
}

func keysOf(m map[string]*v1.Pod) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
