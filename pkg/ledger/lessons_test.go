package ledger

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/sets"
)

func TestLearnCapIsNewsOnlyWhenTighter(t *testing.T) {
	l, _ := newTestLedger()
	k := key("job")
	for _, tt := range []struct {
		perNode  int
		wantNews bool
		wantCap  int
	}{
		{perNode: 3, wantNews: true, wantCap: 3},
		{perNode: 3, wantNews: false, wantCap: 3},
		{perNode: 4, wantNews: false, wantCap: 3},
		{perNode: 2, wantNews: true, wantCap: 2},
	} {
		require.Equal(t, tt.wantNews, l.Lessons.LearnCap(k, "tmpl", tt.perNode), "cap %d", tt.perNode)
		require.Equal(t, tt.wantCap, l.Lessons.View(k).PerNode["tmpl"])
	}
}

func TestExclusionsAndFailedPlansLapse(t *testing.T) {
	l, c := newTestLedger()
	k := key("job")
	require.True(t, l.Lessons.LearnExclusion(k, "tmpl", "n1"))
	l.Lessons.LearnFailedPlan(k, 42)
	c.Step(time.Minute)
	require.False(t, l.Lessons.LearnExclusion(k, "tmpl", "n1"), "no news while it holds; it is renewed")
	require.True(t, l.Lessons.LearnExclusion(k, "other", "n1"), "exclusions are per template")

	for _, tt := range []struct {
		name string
		at   time.Duration // after t0
		want LessonView
	}{
		{name: "all live", at: time.Minute, want: LessonView{PerNode: map[string]int{},
			Excluded: map[string]sets.Set[string]{"tmpl": sets.New("n1"), "other": sets.New("n1")}, Failed: map[uint64]bool{42: true}}},
		{name: "the failed plan lapses after LessonTTL", at: LessonTTL, want: LessonView{PerNode: map[string]int{},
			Excluded: map[string]sets.Set[string]{"tmpl": sets.New("n1"), "other": sets.New("n1")}, Failed: map[uint64]bool{}}},
		{name: "the exclusions lapse LessonTTL after they were last learned", at: time.Minute + LessonTTL, want: LessonView{PerNode: map[string]int{},
			Excluded: map[string]sets.Set[string]{}, Failed: map[uint64]bool{}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c.SetTime(t0.Add(tt.at))
			if diff := cmp.Diff(tt.want, l.Lessons.View(k)); diff != "" {
				t.Errorf("View (-want,+got):\n%s", diff)
			}
		})
	}
	require.True(t, l.Lessons.LearnExclusion(k, "tmpl", "n1"), "a lapsed exclusion learned again is news")
}

func TestViewIsACopy(t *testing.T) {
	l, _ := newTestLedger()
	k := key("job")
	l.Lessons.LearnCap(k, "tmpl", 2)
	v := l.Lessons.View(k)
	v.PerNode["tmpl"] = 9
	require.Equal(t, 2, l.Lessons.View(k).PerNode["tmpl"])
	require.Empty(t, l.Lessons.View(key("unknown")).PerNode)
}
