package gang

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

func TestMovableOf(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        bool
		wantErr     string
	}{
		{name: "absent", want: false},
		{name: "true", annotations: map[string]string{scheduling.AnnotationMovable: "true"}, want: true},
		{name: "false", annotations: map[string]string{scheduling.AnnotationMovable: "false"}, want: false},
		{name: "malformed", annotations: map[string]string{scheduling.AnnotationMovable: "yes please"},
			wantErr: `annotation gpu-gang.x-k8s.io/movable="yes please" is not "true" or "false"`},
		{name: "empty", annotations: map[string]string{scheduling.AnnotationMovable: ""},
			wantErr: `annotation gpu-gang.x-k8s.io/movable="" is not "true" or "false"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MovableOf(&Spec{Annotations: tc.annotations})
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				require.False(t, got, "a malformed value is not movable")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
