package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// crd builds a one-version CRD of kind Widget with the given spec and status
// property schemas (YAML).
func crd(t *testing.T, spec, status string) object {
	t.Helper()
	doc := `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
  versions:
  - name: v1
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        properties:
          spec: ` + spec + `
          status:
            type: object
            properties: ` + status + `
`
	var o object
	if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestExtend(t *testing.T) {
	const (
		spec       = `{type: object, description: base, properties: {size: {type: integer}}}`
		specExt    = `{type: object, description: extension, properties: {size: {type: integer}}}`
		status     = `{phase: {type: string}}`
		statusExt  = `{phase: {type: string}, conditions: {type: array}, observedGeneration: {type: integer}}`
		otherPhase = `{phase: {type: integer}, conditions: {type: array}}`
	)
	tests := []struct {
		name      string
		base, ext object
		wantAdded []string
		wantErr   string
	}{
		{
			name:      "fields the base lacks are added; the spec's own description may differ",
			base:      crd(t, spec, status),
			ext:       crd(t, specExt, statusExt),
			wantAdded: []string{"conditions", "observedGeneration"},
		},
		{
			name:    "a spec that differs is not wire-compatible",
			base:    crd(t, spec, status),
			ext:     crd(t, `{type: object, properties: {size: {type: string}}}`, statusExt),
			wantErr: "spec schemas differ",
		},
		{
			name:    "a shared status field that differs is refused",
			base:    crd(t, spec, status),
			ext:     crd(t, spec, otherPhase),
			wantErr: "status.phase differs",
		},
		{
			name:    "an extension that drops a base field is refused",
			base:    crd(t, spec, statusExt),
			ext:     crd(t, spec, status),
			wantErr: "missing from the extension",
		},
		{
			name:    "an extension that adds nothing is refused",
			base:    crd(t, spec, status),
			ext:     crd(t, spec, status),
			wantErr: "adds no status field",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			added, err := extend(tc.base, tc.ext)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("extend() error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantAdded, added); diff != "" {
				t.Errorf("added (-want,+got):\n%s", diff)
			}
			props := get(tc.base, "spec", "versions").([]any)[0].(object)
			status := get(props, "schema", "openAPIV3Schema", "properties", "status", "properties").(object)
			for _, f := range append([]string{"phase"}, tc.wantAdded...) {
				if _, ok := status[f]; !ok {
					t.Errorf("status.%s is missing from the result", f)
				}
			}
			if d := get(props, "schema", "openAPIV3Schema", "properties", "spec", "description"); d != "base" {
				t.Errorf("spec description = %v; want the base CRD's kept", d)
			}
		})
	}
}
