// Command extend-crd-status adds to a generated CRD the status fields that a
// second CRD of the same kind, generated from a type that extends the first
// one's, has and the first lacks. hack/update-crds.sh uses it to add
// gpu-gang's status.conditions and status.observedGeneration to
// scheduler-plugins' PodGroup CRD.
//
// It refuses to write anything if the two CRDs disagree on what they share:
// the group, kind and versions, each version's spec schema, and each status
// field both have. So the result keeps every field of the base CRD as it was
// generated, and the check proves that the extended Go type is
// wire-compatible with the base one.
//
// Usage:
//
//	extend-crd-status -base BASE.yaml -extension EXT.yaml -out OUT.yaml
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	base := flag.String("base", "", "the CRD to extend")
	ext := flag.String("extension", "", "the CRD generated from the extended type")
	out := flag.String("out", "", "where to write the extended CRD")
	flag.Parse()
	if *base == "" || *ext == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*base, *ext, *out); err != nil {
		fmt.Fprintf(os.Stderr, "extend-crd-status: %v\n", err)
		os.Exit(1)
	}
}

func run(basePath, extPath, outPath string) error {
	base, err := readCRD(basePath)
	if err != nil {
		return err
	}
	ext, err := readCRD(extPath)
	if err != nil {
		return err
	}
	added, err := extend(base, ext)
	if err != nil {
		return err
	}
	data, err := yaml.Marshal(base)
	if err != nil {
		return err
	}
	// controller-gen starts each CRD file with a document separator.
	if err := os.WriteFile(outPath, append([]byte("---\n"), data...), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "extend-crd-status: added status fields %s\n", strings.Join(added, ", "))
	return nil
}

type object = map[string]any

func readCRD(path string) (object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var crd object
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if crd["kind"] != "CustomResourceDefinition" {
		return nil, fmt.Errorf("%s: kind is %v, not CustomResourceDefinition", path, crd["kind"])
	}
	return crd, nil
}

// extend adds ext's extra status properties to base in place and returns
// their names, sorted.
func extend(base, ext object) ([]string, error) {
	// Short names and printer columns are the base CRD's to keep.
	for _, p := range [][]string{{"spec", "group"}, {"spec", "names", "kind"}, {"spec", "names", "plural"}, {"spec", "scope"}} {
		if b, e := get(base, p...), get(ext, p...); !reflect.DeepEqual(b, e) {
			return nil, fmt.Errorf("the CRDs differ at %s: %v and %v", strings.Join(p, "."), b, e)
		}
	}
	baseVersions, _ := get(base, "spec", "versions").([]any)
	extVersions, _ := get(ext, "spec", "versions").([]any)
	if len(baseVersions) == 0 || len(baseVersions) != len(extVersions) {
		return nil, fmt.Errorf("the CRDs have %d and %d versions", len(baseVersions), len(extVersions))
	}
	var added []string
	for i := range baseVersions {
		bv, _ := baseVersions[i].(object)
		ev, _ := extVersions[i].(object)
		if bv["name"] != ev["name"] {
			return nil, fmt.Errorf("version %d is %v in one CRD and %v in the other", i, bv["name"], ev["name"])
		}
		name := fmt.Sprint(bv["name"])
		props := []string{"schema", "openAPIV3Schema", "properties"}
		if b, e := withoutDescription(get(bv, append(props, "spec")...)), withoutDescription(get(ev, append(props, "spec")...)); !reflect.DeepEqual(b, e) {
			return nil, fmt.Errorf("version %s: the spec schemas differ, so the extended type is not wire-compatible", name)
		}
		if !reflect.DeepEqual(get(bv, "subresources"), get(ev, "subresources")) {
			return nil, fmt.Errorf("version %s: the subresources differ", name)
		}
		baseStatus, _ := get(bv, append(props, "status", "properties")...).(object)
		extStatus, _ := get(ev, append(props, "status", "properties")...).(object)
		if baseStatus == nil || extStatus == nil {
			return nil, fmt.Errorf("version %s: both CRDs must have status properties", name)
		}
		fields := make([]string, 0, len(extStatus))
		for f := range extStatus {
			fields = append(fields, f)
		}
		sort.Strings(fields)
		for _, f := range fields {
			if b, ok := baseStatus[f]; ok {
				if !reflect.DeepEqual(b, extStatus[f]) {
					return nil, fmt.Errorf("version %s: status.%s differs between the CRDs", name, f)
				}
				continue
			}
			baseStatus[f] = extStatus[f]
			if i == 0 {
				added = append(added, f)
			}
		}
		for f := range baseStatus {
			if _, ok := extStatus[f]; !ok {
				return nil, fmt.Errorf("version %s: status.%s is missing from the extension", name, f)
			}
		}
	}
	if len(added) == 0 {
		return nil, errors.New("the extension adds no status field")
	}
	return added, nil
}

// withoutDescription returns a shallow copy of a schema without its own
// description: the two types document their spec fields differently, and
// only the schema underneath must match.
func withoutDescription(schema any) any {
	m, ok := schema.(object)
	if !ok {
		return schema
	}
	out := object{}
	for k, v := range m {
		if k != "description" {
			out[k] = v
		}
	}
	return out
}

// get follows keys through nested objects and returns nil where a key is
// missing.
func get(o object, keys ...string) any {
	var cur any = o
	for _, k := range keys {
		m, ok := cur.(object)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}
