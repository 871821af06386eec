package dedupevents

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
)

func TestRecordOncePerNote(t *testing.T) {
	fake := events.NewFakeRecorder(10)
	clock := testingclock.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	r := New(fake, clock)
	pod := &v1.Pod{}
	drain := func() []string {
		var out []string
		for {
			select {
			case e := <-fake.Events:
				out = append(out, e)
			default:
				return out
			}
		}
	}
	r.Record("pod/a/Waiting", pod, nil, v1.EventTypeNormal, "Waiting", "1/3 present")
	r.Record("pod/a/Waiting", pod, nil, v1.EventTypeNormal, "Waiting", "1/3 present")
	require.Equal(t, []string{"Normal Waiting 1/3 present"}, drain(), "the same note is recorded once")
	r.Record("pod/a/Waiting", pod, nil, v1.EventTypeNormal, "Waiting", "2/3 present")
	r.Record("pod/b/Waiting", pod, nil, v1.EventTypeNormal, "Waiting", "2/3 present")
	require.Len(t, drain(), 2, "a new note, or another key, is recorded")
	clock.Step(RepeatAfter)
	r.Record("pod/a/Waiting", pod, nil, v1.EventTypeNormal, "Waiting", "2/3 present")
	require.Len(t, drain(), 1, "a note is recorded again once it is old")
}
