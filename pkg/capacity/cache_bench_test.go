package capacity

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkInventoriesCurrentUnchanged is what every planning pass pays
// to learn that none of 5,000 nodes' slices changed: a list (a fresh
// slice of the same objects, as a lister returns) and its fingerprint.
func BenchmarkInventoriesCurrentUnchanged(b *testing.B) {
	objects := make([]*resourceapi.ResourceSlice, 5000)
	for i := range objects {
		objects[i] = sliceOf(fmt.Sprintf("node-%04d", i), gpus(8, "H100")...)
		objects[i].UID = types.UID(fmt.Sprintf("uid-%04d", i))
		objects[i].ResourceVersion = fmt.Sprint(1000 + i)
	}
	inv := NewInventories(func() ([]*resourceapi.ResourceSlice, error) {
		return append([]*resourceapi.ResourceSlice(nil), objects...), nil
	}, testCEL)
	first, err := inv.Current()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if m, _ := inv.Current(); m != first {
			b.Fatal("unchanged slices rebuilt the inventory")
		}
	}
}
