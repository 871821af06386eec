package helmtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const (
	chartDir         = "../../charts/gpu-gang"
	kustomizationDir = "../../manifests"
	namespace        = "gpu-gang-system"
	configKey        = "scheduler-config.yaml"
)

// helmOnlyLabels are the labels Helm's conventions add and kustomize has
// no use for; helmOnlyAnnotations roll the scheduler on a configuration
// change, as kustomize's hashed ConfigMap name does.
var (
	helmOnlyLabels      = []string{"app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version", "helm.sh/chart"}
	helmOnlyAnnotations = []string{"checksum/config"}
)

// object is one rendered object, as generic data.
type object map[string]any

func (o object) id() string {
	meta, _ := o["metadata"].(map[string]any)
	return fmt.Sprintf("%v %v/%v", o["kind"], meta["namespace"], meta["name"])
}

// render renders the chart as `helm template --include-crds` would, with
// the given values on top of the chart's.
func render(t *testing.T, values map[string]any) []object {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	cfg := action.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewMemory())
	cfg.KubeClient = &kubefake.PrintingKubeClient{Out: io.Discard}
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = "gpu-gang"
	install.Namespace = namespace
	install.Replace = true
	install.IncludeCRDs = true
	install.KubeVersion = kubeVersion(t)
	rel, err := install.RunWithContext(t.Context(), ch, values)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	r, ok := rel.(*release.Release)
	if !ok {
		t.Fatalf("the install returned a %T", rel)
	}
	return decode(t, []byte(r.Manifest))
}

// kustomizeBuild builds manifests/ as `kubectl apply -k` would.
func kustomizeBuild(t *testing.T) []object {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), kustomizationDir)
	if err != nil {
		t.Fatalf("kustomize build manifests/: %v", err)
	}
	data, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, data)
}

func decode(t *testing.T, data []byte) []object {
	t.Helper()
	var out []object
	r := utilyaml.NewYAMLReader(bufioReader(data))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		o := object{}
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if len(o) > 0 {
			out = append(out, o)
		}
	}
}

// byID indexes objects by kind, namespace and name, failing on duplicates.
func byID(t *testing.T, objs []object) map[string]object {
	t.Helper()
	out := map[string]object{}
	for _, o := range objs {
		if _, dup := out[o.id()]; dup {
			t.Errorf("two objects %s", o.id())
		}
		out[o.id()] = o
	}
	return out
}

// configMapHash is the suffix kustomize's configMapGenerator appends.
var configMapHash = regexp.MustCompile(`^(gpu-gang-scheduler-config)-[a-z0-9]{10}$`)

// normalize takes out what legitimately differs between the two installs:
// Helm's own labels and annotations; the label kustomize puts on the CRD,
// which Helm installs from crds/ as it is, untemplated; kustomize's
// ConfigMap hash suffix (in the name and in the reference to it); and the
// scheduler configuration's text, compared as data instead, since the
// chart renders it from values without manifests/scheduler-config.yaml's
// comments.
func normalize(t *testing.T, o object) object {
	t.Helper()
	if o["kind"] == "CustomResourceDefinition" {
		meta, _ := o["metadata"].(map[string]any)
		delete(meta, "labels")
	}
	walkMeta(o, func(meta map[string]any) {
		for _, field := range []struct {
			name string
			keys []string
		}{{"labels", helmOnlyLabels}, {"annotations", helmOnlyAnnotations}} {
			m, _ := meta[field.name].(map[string]any)
			for _, k := range field.keys {
				delete(m, k)
			}
			if m != nil && len(m) == 0 {
				delete(meta, field.name)
			}
		}
	})
	var rename func(v any) any
	rename = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				v[k] = rename(e)
			}
		case []any:
			for i, e := range v {
				v[i] = rename(e)
			}
		case string:
			return configMapHash.ReplaceAllString(v, "$1")
		}
		return v
	}
	rename(map[string]any(o))
	if o["kind"] == "ConfigMap" {
		data, _ := o["data"].(map[string]any)
		text, _ := data[configKey].(string)
		parsed := map[string]any{}
		if err := yaml.Unmarshal([]byte(text), &parsed); err != nil {
			t.Fatalf("%s: %s: %v", o.id(), configKey, err)
		}
		data[configKey] = parsed
	}
	return o
}

// walkMeta calls f on the object's metadata and on every pod template's.
func walkMeta(o object, f func(map[string]any)) {
	if meta, ok := o["metadata"].(map[string]any); ok {
		f(meta)
	}
	spec, _ := o["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	if meta, ok := tmpl["metadata"].(map[string]any); ok {
		f(meta)
	}
}

// The chart with its default values renders the objects the kustomize
// install builds, each the same once the differences normalize documents
// are taken out, except the Namespace: a chart is installed into a
// namespace Helm creates (--create-namespace), not one it owns.
func TestChartMatchesKustomize(t *testing.T) {
	var chart, kustomized []object
	for _, o := range render(t, nil) {
		chart = append(chart, normalize(t, o))
	}
	for _, o := range kustomizeBuild(t) {
		if o["kind"] != "Namespace" {
			kustomized = append(kustomized, normalize(t, o))
		}
	}
	chartByID, kustomizeByID := byID(t, chart), byID(t, kustomized)
	ids := func(m map[string]object) []string { return slices.Sorted(maps.Keys(m)) }
	if diff := cmp.Diff(ids(kustomizeByID), ids(chartByID)); diff != "" {
		t.Fatalf("objects (-kustomize,+chart):\n%s", diff)
	}
	for _, id := range ids(kustomizeByID) {
		if diff := cmp.Diff(map[string]any(kustomizeByID[id]), map[string]any(chartByID[id])); diff != "" {
			t.Errorf("%s (-kustomize,+chart):\n%s", id, diff)
		}
	}
}

// The chart installs the generated CRD file itself, byte for byte
// (hack/update-crds.sh writes both copies).
func TestChartCRDIsTheGeneratedOne(t *testing.T) {
	const file = "crds/scheduling.x-k8s.io_podgroups.yaml"
	want, err1 := os.ReadFile(kustomizationDir + "/" + file)
	got, err2 := os.ReadFile(chartDir + "/" + file)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("charts/gpu-gang/%s differs from manifests/%s; run hack/update-crds.sh", file, file)
	}
}

// Values reach the objects they are for.
func TestChartValues(t *testing.T) {
	values := map[string]any{
		"image":    map[string]any{"repository": "registry.example.com/gpu-gang", "tag": "v9.9.9", "pullPolicy": "Always"},
		"logLevel": 4,
		"scheduler": map[string]any{
			"replicas": 3, "schedulerName": "gangs",
			"resources": map[string]any{"requests": map[string]any{"cpu": "1", "memory": "1Gi"}, "limits": map[string]any{"memory": "4Gi"}},
		},
		"controller":     map[string]any{"replicas": 1, "missingMembersGrace": "5m"},
		"topology":       map[string]any{"levels": []any{"example.com/rack", "example.com/row"}},
		"timeouts":       map[string]any{"permitWaitingTimeSeconds": 120, "podGroupBackoffSeconds": 5, "podGroupMaxBackoffSeconds": 300, "claimReleaseGraceSeconds": 30},
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
		"nodeSelector":   map[string]any{"node-role.kubernetes.io/control-plane": ""},
	}
	objs := byID(t, render(t, values))
	get := func(id string) object {
		t.Helper()
		o, ok := objs[id]
		if !ok {
			t.Fatalf("no %s", id)
		}
		return o
	}
	sched := get("Deployment gpu-gang-system/gpu-gang-scheduler")
	ctrl := get("Deployment gpu-gang-system/gpu-gang-podgroup-controller")
	for _, tc := range []struct {
		what string
		got  any
		want any
	}{
		{"scheduler replicas", at(sched, "spec", "replicas"), float64(3)},
		{"controller replicas", at(ctrl, "spec", "replicas"), float64(1)},
		{"scheduler image", at(sched, "spec", "template", "spec", "containers", 0, "image"), "registry.example.com/gpu-gang:v9.9.9"},
		{"controller image", at(ctrl, "spec", "template", "spec", "containers", 0, "image"), "registry.example.com/gpu-gang:v9.9.9"},
		{"pull policy", at(sched, "spec", "template", "spec", "containers", 0, "imagePullPolicy"), "Always"},
		{"scheduler resources", at(sched, "spec", "template", "spec", "containers", 0, "resources"), map[string]any{
			"requests": map[string]any{"cpu": "1", "memory": "1Gi"}, "limits": map[string]any{"memory": "4Gi"}}},
		{"scheduler log level", at(sched, "spec", "template", "spec", "containers", 0, "command", 2), "--v=4"},
		// As manifests/deploy/deployment.yaml runs it (pkg/controlplane.SchedulerGatesFlag).
		{"scheduler feature gates", at(sched, "spec", "template", "spec", "containers", 0, "command", 3),
			"--feature-gates=GenericWorkload=false,NominatedNodeNameForExpectation=false"},
		{"controller flags", at(ctrl, "spec", "template", "spec", "containers", 0, "command"), []any{
			"/podgroup-controller", "--leader-elect=true", "--leader-elect-resource-name=gpu-gang-podgroup-controller",
			// The controller reports on the native PodGroups of the profile's scheduler name.
			"--scheduler-names=gangs",
			"--metrics-bind-address=:8443", "--health-probe-bind-address=:8081", "--v=4", "--missing-members-grace=5m"}},
		{"node selector", at(ctrl, "spec", "template", "spec", "nodeSelector"), map[string]any{"node-role.kubernetes.io/control-plane": ""}},
	} {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("%s (-want,+got):\n%s", tc.what, diff)
		}
	}

	cm := get("ConfigMap gpu-gang-system/gpu-gang-scheduler-config")
	cfg := map[string]any{}
	if err := yaml.Unmarshal([]byte(at(cm, "data", configKey).(string)), &cfg); err != nil {
		t.Fatal(err)
	}
	if got := at(object(cfg), "profiles", 0, "schedulerName"); got != "gangs" {
		t.Errorf("schedulerName %v, want gangs", got)
	}
	wantArgs := map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "CoschedulingArgs",
		"permitWaitingTimeSeconds": float64(120), "podGroupBackoffSeconds": float64(5), "podGroupMaxBackoffSeconds": float64(300),
		"claimReleaseGraceSeconds": float64(30), "topologyLevels": []any{"example.com/rack", "example.com/row"},
	}
	if diff := cmp.Diff(wantArgs, at(object(cfg), "profiles", 0, "pluginConfig", 0, "args")); diff != "" {
		t.Errorf("CoschedulingArgs (-want,+got):\n%s", diff)
	}
	// Another configuration rolls the scheduler.
	defaults := byID(t, render(t, nil))
	sum := func(o object) any { return at(o, "spec", "template", "metadata", "annotations", "checksum/config") }
	if sum(sched) == sum(defaults["Deployment gpu-gang-system/gpu-gang-scheduler"]) {
		t.Error("a different configuration left the scheduler's checksum/config unchanged")
	}

	sm := get("ServiceMonitor gpu-gang-system/gpu-gang")
	if got := at(sm, "metadata", "labels", "release"); got != "prometheus" {
		t.Errorf("ServiceMonitor label release=%v, want prometheus", got)
	}
	selector, _ := at(sm, "spec", "selector", "matchLabels").(map[string]any)
	port := at(sm, "spec", "endpoints", 0, "port")
	var scraped []string
	for _, id := range slices.Sorted(maps.Keys(objs)) {
		o := objs[id]
		if o["kind"] != "Service" {
			continue
		}
		labels, _ := at(o, "metadata", "labels").(map[string]any)
		matches := len(selector) > 0
		for k, v := range selector {
			matches = matches && labels[k] == v
		}
		if matches && at(o, "spec", "ports", 0, "name") == port {
			scraped = append(scraped, id)
		}
	}
	want := []string{"Service gpu-gang-system/gpu-gang-podgroup-controller-metrics", "Service gpu-gang-system/gpu-gang-scheduler-metrics"}
	if diff := cmp.Diff(want, scraped); diff != "" {
		t.Errorf("Services the ServiceMonitor scrapes on port %v (-want,+got):\n%s", port, diff)
	}
}

// A chart without a topology is refused with a message naming the fix.
func TestChartRefusesNoTopology(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := action.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewMemory())
	cfg.KubeClient = &kubefake.PrintingKubeClient{Out: io.Discard}
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName, install.Namespace, install.Replace = "gpu-gang", namespace, true
	install.KubeVersion = kubeVersion(t)
	_, err = install.RunWithContext(t.Context(), ch, map[string]any{"topology": map[string]any{"preset": "", "levels": []any{}}})
	if err == nil || !strings.Contains(err.Error(), "set topology.preset or topology.levels") {
		t.Errorf("rendering with no topology: %v, want the error naming topology.preset", err)
	}
}

// kubeVersion is the Kubernetes version the chart is rendered for, as
// `helm template --kube-version` sets it; gpu-gang's kube-scheduler is
// 1.37.
func kubeVersion(t *testing.T) *common.KubeVersion {
	t.Helper()
	kv, err := common.ParseKubeVersion("v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// at follows a path of map keys and list indices, nil where it breaks.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				if o, isObj := v.(object); isObj {
					m, ok = map[string]any(o), true
				}
			}
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}
