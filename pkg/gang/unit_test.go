package gang

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// testView is a scheduler's View over a set of reserved members: a
// census from the members themselves, segments as their annotations say.
type testView struct{ reserved map[types.UID]bool }

func (v testView) Census(_ Key, members []*v1.Pod) Census {
	var c Census
	for _, p := range members {
		if v.reserved[p.UID] && p.Spec.NodeName == "" {
			c.Reserved++
			continue
		}
		c.Add(p)
	}
	return c
}

func (v testView) Reserved(uid types.UID) bool { return v.reserved[uid] }

func (v testView) Segments(spec *Spec, members []*v1.Pod) (Segments, error) {
	return SegmentsOf(spec, members)
}

// unitMembers builds n members of the native PodGroup group, named
// group-0 .. group-(n-1), ranked by index; each where says where one is:
// p pending, h held (gated), r reserved, b bound. It returns the members
// and the reserved ones.
func unitMembers(group, where string) ([]*v1.Pod, map[types.UID]bool) {
	var out []*v1.Pod
	reserved := map[types.UID]bool{}
	for i, c := range where {
		name := fmt.Sprintf("%s-%d", group, i)
		w := pod(name).UID(name).Label(scheduling.KubeflowReplicaIndexLabel, strconv.Itoa(i))
		switch c {
		case 'h':
			w = w.SchedulingGates([]string{"queue"})
		case 'b':
			w = w.Node("n-" + name)
		case 'r':
			reserved[types.UID(name)] = true
		}
		out = append(out, gangtest.InNativeGroup(w.Obj(), group))
	}
	return out, reserved
}

func names(pods []*v1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// unitFixture reads a unit from a hierarchy's objects and its PodGroups'
// members, spelled as unitMembers spells them.
func unitFixture(t *testing.T, key Key, objs []interface{}, where map[string]string) (Unit, testView) {
	t.Helper()
	s := hierarchySources(t, objs...)
	byGroup := map[Key][]*v1.Pod{}
	view := testView{reserved: map[types.UID]bool{}}
	for group, w := range where {
		members, reserved := unitMembers(group, w)
		byGroup[nativeKey(group)] = members
		for uid := range reserved {
			view.reserved[uid] = true
		}
	}
	u, err := UnitOf(s, func(k Key) ([]*v1.Pod, error) { return slices.Clone(byGroup[k]), nil }, key)
	require.NoError(t, err)
	return u, view
}

// A plain gang, a segmented gang and a 2-level composite each decide, as
// their own kind, the quorum, the next batch, a late member's batch and
// readiness, and the units preemption may take.
func TestUnits(t *testing.T) {
	segmented := func(minCount int32) *gangtest.NativePodGroupWrapper {
		return child("seg", "", minCount, 0).Annotation(scheduling.AnnotationSegmentSize, "2").
			Annotation(scheduling.AnnotationSegmentTopologyRequired, scheduling.LabelGPUClique)
	}
	tests := []struct {
		name  string
		key   Key
		objs  []interface{}
		where map[string]string
		// kind is the unit's type, as UnitOf decided it.
		kind string
		// quorum is the unit's, less its census.
		quorum Quorum
		need   int32
		// batch is NextBatch's members, or waits its WaitError's reason.
		batch []string
		waits string
		// joiner joins the running unit with joined, or waits joinWaits.
		joiner     string
		joined     []string
		joinWaits  string
		ready      map[string]bool
		victims    map[Key][]string
		minMember  int32
		surplus    int
		interchang bool
	}{
		{
			name: "plain: the next pending members in rank order, a held one passed over",
			key:  nativeKey("flat"), objs: []interface{}{child("flat", "", 2, 0)},
			where: map[string]string{"flat": "hpp"},
			kind:  "*gang.plainUnit", quorum: Quorum{Gathered: true, Missing: 2}, need: 2,
			batch:  []string{"flat-1", "flat-2"},
			joiner: "flat-2", joined: []string{"flat-2"},
			ready:   map[string]bool{"flat-1": true},
			victims: map[Key][]string{nativeKey("flat"): {"flat-0", "flat-1", "flat-2"}}, minMember: 2, surplus: 0, interchang: true,
		},
		{
			name: "plain: a running gang's surplus above its quorum may go",
			key:  nativeKey("flat"), objs: []interface{}{child("flat", "", 2, 0)},
			where: map[string]string{"flat": "bbbb"},
			kind:  "*gang.plainUnit", quorum: Quorum{Gathered: true, Placed: true, Bound: true}, need: 2,
			joiner: "flat-3", joined: []string{"flat-3"},
			ready:   map[string]bool{"flat-3": true},
			victims: map[Key][]string{nativeKey("flat"): {"flat-0", "flat-1", "flat-2", "flat-3"}}, minMember: 2, surplus: 2, interchang: true,
		},
		{
			name: "plain: too few pending members wait",
			key:  nativeKey("flat"), objs: []interface{}{child("flat", "", 3, 0)},
			where: map[string]string{"flat": "bhp"},
			kind:  "*gang.plainUnit", quorum: Quorum{Gathered: true, Missing: 2}, need: 3,
			waits:  "waiting for members of PodGroup ns/flat (scheduling.k8s.io/v1beta1): 2 more must be placed but 1 are pending",
			joiner: "flat-2", joined: []string{"flat-2"},
			ready:   map[string]bool{"flat-2": true},
			victims: map[Key][]string{nativeKey("flat"): {"flat-0", "flat-1", "flat-2"}}, minMember: 3, surplus: 0, interchang: true,
		},
		{
			name: "segmented: a segment with a held member cannot start; the next whole one does",
			key:  nativeKey("seg"), objs: []interface{}{segmented(2)},
			where: map[string]string{"seg": "phpp"},
			kind:  "*gang.segmentedUnit", quorum: Quorum{Gathered: true, Missing: 2}, need: 2,
			batch:  []string{"seg-2", "seg-3"},
			joiner: "seg-0", joinWaits: "waiting for members of PodGroup ns/seg (scheduling.k8s.io/v1beta1): seg-0 joins the running gang with its whole segment of 2 consecutive ranks, of which 1 are present",
			ready:   map[string]bool{"seg-0": false},
			victims: map[Key][]string{nativeKey("seg"): {"seg-0", "seg-1", "seg-2", "seg-3"}}, minMember: 2, interchang: true,
		},
		{
			name: "segmented: a running gang grows by a whole segment, which binds once all of it holds a node",
			key:  nativeKey("seg"), objs: []interface{}{segmented(2)},
			where: map[string]string{"seg": "bbrp"},
			kind:  "*gang.segmentedUnit", quorum: Quorum{Gathered: true, Placed: true, Bound: true}, need: 2,
			joiner: "seg-3", joined: []string{"seg-3"},
			ready:   map[string]bool{"seg-1": true, "seg-2": false},
			victims: map[Key][]string{nativeKey("seg"): {"seg-0", "seg-1", "seg-2", "seg-3"}}, minMember: 2, surplus: 1, interchang: true,
		},
		{
			name: "segmented: too few whole segments wait",
			key:  nativeKey("seg"), objs: []interface{}{segmented(4)},
			where: map[string]string{"seg": "pphp"},
			kind:  "*gang.segmentedUnit", quorum: Quorum{Gathered: true, Missing: 4}, need: 4,
			waits:  "waiting for members of PodGroup ns/seg (scheduling.k8s.io/v1beta1): 4 more must be placed, in whole segments of 2 consecutive ranks, but its members present do not make up enough whole segments",
			joiner: "seg-0", joined: []string{"seg-0", "seg-1"},
			ready:   map[string]bool{"seg-0": false},
			victims: map[Key][]string{nativeKey("seg"): {"seg-0", "seg-1", "seg-2", "seg-3"}}, minMember: 4, interchang: true,
		},
		{
			name: "composite: the first children that gathered, each to its own quorum",
			key:  compositeKey("job"), objs: trainHierarchy(),
			where: map[string]string{"launcher": "p", "pp-0-a": "pppp", "pp-0-b": "pppp", "pp-1-a": "pp"},
			kind:  "*gang.compositeUnit", quorum: Quorum{Gathered: true, Missing: 2}, need: 2,
			batch: []string{"launcher-0", "pp-0-a-0", "pp-0-a-1", "pp-0-a-2", "pp-0-a-3", "pp-0-b-0", "pp-0-b-1", "pp-0-b-2", "pp-0-b-3"},
			// Before the composite runs, its member brings its own
			// PodGroup to quorum if Admit chose it, and nothing else.
			joiner: "pp-1-a-0", joinWaits: "waiting for members of PodGroup ns/pp-1-a (scheduling.k8s.io/v1beta1) under running ns/job (CompositePodGroup scheduling.k8s.io/v1alpha3): 2/2 present",
			ready:     map[string]bool{"pp-1-a-0": false},
			victims:   map[Key][]string{compositeKey("job"): {"launcher-0", "pp-0-a-0", "pp-0-a-1", "pp-0-a-2", "pp-0-a-3", "pp-0-b-0", "pp-0-b-1", "pp-0-b-2", "pp-0-b-3", "pp-1-a-0", "pp-1-a-1"}},
			minMember: 11,
		},
		{
			name: "composite: a child that gathers once the composite runs joins whole, and binds once all of it is placed",
			key:  compositeKey("job"), objs: trainHierarchy(),
			where: map[string]string{"launcher": "b", "pp-0-a": "bbbb", "pp-0-b": "bbbb", "pp-1-a": "rp"},
			kind:  "*gang.compositeUnit", quorum: Quorum{Gathered: true, Placed: true, Bound: true}, need: 2,
			batch:  []string{"pp-1-a-1"},
			joiner: "pp-1-a-1", joined: []string{"pp-1-a-1"},
			ready: map[string]bool{"pp-1-a-0": false, "launcher-0": true},
			// Only two children placed: none above minGroupCount.
			victims:   map[Key][]string{compositeKey("job"): {"launcher-0", "pp-0-a-0", "pp-0-a-1", "pp-0-a-2", "pp-0-a-3", "pp-0-b-0", "pp-0-b-1", "pp-0-b-2", "pp-0-b-3", "pp-1-a-0", "pp-1-a-1"}},
			minMember: 11,
		},
		{
			name: "composite: a running composite gives its newest child above minGroupCount as a victim unit of its own",
			key:  compositeKey("job"), objs: trainHierarchy(),
			where: map[string]string{"launcher": "b", "pp-0-a": "bbbb", "pp-0-b": "bbbb", "pp-1-a": "bb"},
			kind:  "*gang.compositeUnit", quorum: Quorum{Gathered: true, Placed: true, Bound: true}, need: 2,
			joiner: "pp-1-a-1", joined: []string{"pp-1-a-1"},
			ready: map[string]bool{"pp-1-a-1": true},
			victims: map[Key][]string{
				compositeKey("job"):  {"launcher-0", "pp-0-a-0", "pp-0-a-1", "pp-0-a-2", "pp-0-a-3", "pp-0-b-0", "pp-0-b-1", "pp-0-b-2", "pp-0-b-3"},
				compositeKey("pp-1"): {"pp-1-a-0", "pp-1-a-1"},
			},
			minMember: 11,
		},
		{
			name: "composite: too few children gathered wait",
			key:  compositeKey("job"), objs: trainHierarchy(),
			where: map[string]string{"launcher": "p", "pp-0-a": "pp"},
			kind:  "*gang.compositeUnit", quorum: Quorum{Missing: 2, Absent: 1}, need: 2,
			waits:  "waiting for the PodGroups under CompositePodGroup ns/job (CompositePodGroup scheduling.k8s.io/v1alpha3): 1 of minGroupCount 2 have their members (3 PodGroups in all)",
			joiner: "pp-0-a-0", joinWaits: "waiting for the PodGroups under CompositePodGroup ns/job (CompositePodGroup scheduling.k8s.io/v1alpha3): 1 of minGroupCount 2 have their members (3 PodGroups in all)",
			ready:     map[string]bool{"pp-0-a-0": false},
			victims:   map[Key][]string{compositeKey("job"): {"launcher-0", "pp-0-a-0", "pp-0-a-1"}},
			minMember: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, v := unitFixture(t, tt.key, tt.objs, tt.where)
			require.Equal(t, tt.kind, fmt.Sprintf("%T", u))
			require.Equal(t, tt.key, u.Key())
			require.NoError(t, u.Validate())
			q := u.Quorum(v)
			require.Equal(t, tt.quorum, q.Quorum)
			require.Equal(t, tt.need, q.Need)
			require.Equal(t, tt.need, u.Spec().MinMember, "the Spec's MinMember is what the quorum counts to")

			batch, err := u.NextBatch(v, q)
			if tt.waits != "" {
				var w *WaitError
				require.ErrorAs(t, err, &w)
				require.Equal(t, tt.waits, w.Reason)
			} else {
				require.NoError(t, err)
				if diff := cmp.Diff(tt.batch, names(batch), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("NextBatch (-want,+got):\n%s", diff)
				}
			}

			byName := map[string]*v1.Pod{}
			for _, p := range u.Members() {
				byName[p.Name] = p
			}
			joined, err := u.Joining(v, byName[tt.joiner])
			if tt.joinWaits != "" {
				var w *WaitError
				require.ErrorAs(t, err, &w)
				require.Equal(t, tt.joinWaits, w.Reason)
			} else {
				require.NoError(t, err)
				if diff := cmp.Diff(tt.joined, names(joined)); diff != "" {
					t.Errorf("Joining (-want,+got):\n%s", diff)
				}
			}
			for name, want := range tt.ready {
				require.Equal(t, want, u.Ready(v, byName[name]), "Ready(%s)", name)
			}

			got := map[Key][]string{}
			for k, pods := range u.VictimUnits(v, u.Members()) {
				got[k] = names(pods)
			}
			if diff := cmp.Diff(tt.victims, got); diff != "" {
				t.Errorf("VictimUnits (-want,+got):\n%s", diff)
			}
			minMember, surplus := u.Disruption(v, u.Members())
			require.Equal(t, tt.minMember, minMember, "Disruption's minMember")
			require.Equal(t, tt.surplus, surplus, "Disruption's surplus")
			require.Equal(t, tt.interchang, InterchangeableMembers(u.Key()))
		})
	}
}

// shapeRecorder records which shape a unit asked for.
type shapeRecorder struct{ got string }

func (s *shapeRecorder) ShapeGang() error        { s.got = "gang"; return nil }
func (s *shapeRecorder) ShapeTree(t *Tree) error { s.got = "tree " + t.Root().Key.Name; return nil }

// A composite is shaped as one tree; a gang, segmented or not, as itself.
func TestUnitShape(t *testing.T) {
	for _, tt := range []struct {
		key  Key
		want string
	}{
		{nativeKey("flat"), "gang"},
		{compositeKey("job"), "tree job"},
	} {
		u, _ := unitFixture(t, tt.key, trainHierarchy(), map[string]string{"flat": "pp"})
		var s shapeRecorder
		require.NoError(t, u.Shape(&s))
		require.Equal(t, tt.want, s.got, tt.key.String())
	}
}

// A composite whose tree cannot be read says which composite to fix.
func TestUnitOfBrokenHierarchy(t *testing.T) {
	s := hierarchySources(t, composite("orphan", 0).Parent("gone").MinGroupCount(1), child("a", "orphan", 1, 0))
	_, err := UnitOf(s, func(Key) ([]*v1.Pod, error) { return nil, nil }, compositeKey("orphan"))
	var h *HierarchyError
	require.ErrorAs(t, err, &h)
	require.Equal(t, compositeKey("orphan"), h.Root)
	require.ErrorIs(t, err, ErrMissingParent)
}

// A composite with fewer children than minGroupCount can never gather and
// says how to fix it; one that waits for members does not; a gang never is.
func TestUnitGathering(t *testing.T) {
	tooFew := []interface{}{composite("job", 0).MinGroupCount(3), child("a", "job", 1, 0), child("b", "job", 1, 1)}
	for _, tt := range []struct {
		name        string
		key         Key
		objs        []interface{}
		where       map[string]string
		wantInvalid bool
		wantStatus  string
	}{
		{name: "composite short of children", key: compositeKey("job"), objs: tooFew, where: map[string]string{"a": "p"}, wantInvalid: true,
			wantStatus: "waiting for the PodGroups under CompositePodGroup ns/job (CompositePodGroup scheduling.k8s.io/v1alpha3): 1 of minGroupCount 3 have their members (2 PodGroups in all)"},
		{name: "composite waiting for members", key: compositeKey("job"), objs: trainHierarchy(), where: map[string]string{"launcher": "p"},
			wantStatus: "waiting for the PodGroups under CompositePodGroup ns/job (CompositePodGroup scheduling.k8s.io/v1alpha3): 1 of minGroupCount 2 have their members (3 PodGroups in all)"},
		{name: "gang waiting for members", key: nativeKey("flat"), objs: trainHierarchy(), where: map[string]string{"flat": "p"},
			wantStatus: "waiting for members of PodGroup ns/flat (scheduling.k8s.io/v1beta1): 1/2 present"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u, v := unitFixture(t, tt.key, tt.objs, tt.where)
			q := u.Quorum(v)
			require.False(t, q.Gathered)
			g := u.Gathering(q)
			require.Equal(t, tt.wantInvalid, g.Invalid)
			require.Equal(t, tt.wantStatus, g.Status)
			if tt.wantInvalid {
				require.Contains(t, g.Event, "create the missing children")
			}
		})
	}
}

// QuorumWith counts a gang's members against a recorded minMember, and a
// composite's children against its own minGroupCount.
func TestUnitQuorumWith(t *testing.T) {
	plain, v := unitFixture(t, nativeKey("flat"), trainHierarchy(), map[string]string{"flat": "bbb"})
	require.True(t, plain.QuorumWith(v, 3).Bound)
	require.False(t, plain.QuorumWith(v, 4).Bound, "the recorded count, not the PodGroup's minCount of 2")
	comp, v := unitFixture(t, compositeKey("job"), trainHierarchy(), map[string]string{"launcher": "b", "pp-0-a": "bbbb", "pp-0-b": "bbbb"})
	require.True(t, comp.QuorumWith(v, 100).Bound, "two children bound reach minGroupCount 2 whatever the record says")
}
