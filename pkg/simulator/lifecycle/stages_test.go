package lifecycle

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestStagesConfig checks the kwok configuration the simulator ships: one
// KwokConfiguration that sets every option kwok leaves zero when a file sets
// any, a node stage (without one kwok manages no node, so no pod), and pod
// stages that read the run-for annotation this package exports.
func TestStagesConfig(t *testing.T) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stages), 4096)
	kinds := map[string][]string{}
	var options map[string]any
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		kind, _ := doc["kind"].(string)
		switch kind {
		case "KwokConfiguration":
			options, _ = doc["options"].(map[string]any)
		case "Stage":
			spec, _ := doc["spec"].(map[string]any)
			ref, _ := spec["resourceRef"].(map[string]any)
			res, _ := ref["kind"].(string)
			name, _ := doc["metadata"].(map[string]any)["name"].(string)
			kinds[res] = append(kinds[res], name)
		default:
			t.Fatalf("unexpected document kind %q", kind)
		}
	}
	require.NotNil(t, options)
	for _, key := range []string{"manageNodesWithAnnotationSelector", "nodeLeaseParallelism", "podPlayStageParallelism", "nodePlayStageParallelism", "podsOnNodeSyncParallelism"} {
		require.Contains(t, options, key)
	}
	require.NotEmpty(t, kinds["Node"], "kwok runs no node controller, and so manages no pod, without a node stage")
	require.ElementsMatch(t, []string{"sim-pod-running", "sim-pod-succeeded", "sim-pod-delete"}, kinds["Pod"])
	require.Equal(t, 2, strings.Count(string(stages), RunForAnnotation), "the succeeded stage selects pods by the annotation and delays by its value")
}
