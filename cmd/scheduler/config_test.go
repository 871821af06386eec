package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/yaml"

	"github.com/gpu-gang/gpu-gang/pkg/scheduler"
)

// configFile is the configuration the deployment ships, the integration
// tests run and the simulator starts from.
const configFile = "../../manifests/scheduler-config.yaml"

// setup runs kube-scheduler's own start-up path (app.Setup, as the command
// does) on a configuration file, against a stand-in API server that serves
// empty PodGroup and pod lists, so every plugin is really constructed. It
// also returns how many PodGroup informers started.
func setup(t *testing.T, file string) (*schedconfig.KubeSchedulerConfiguration, map[string]*schedconfig.Plugins, int32, error) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	// Lists and watches the plugin makes of its own: PodGroups, and the
	// succeeded pods that count towards quorum.
	served := map[string][2]string{
		"/apis/scheduling.x-k8s.io/v1alpha1/podgroups": {"scheduling.x-k8s.io/v1alpha1", "PodGroup"},
		"/api/v1/pods": {"v1", "Pod"},
	}
	// An informer starts with a list, or a watch that sends the initial
	// events.
	var podGroupInformers atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, ok := served[r.URL.Path]
		if !ok {
			t.Logf("stand-in API server: no %s %s", r.Method, r.URL)
			http.NotFound(w, r)
			return
		}
		apiVersion, name := kind[0], kind[1]
		watching, initial := r.URL.Query().Get("watch") == "true", r.URL.Query().Get("sendInitialEvents") == "true"
		if name == "PodGroup" && (!watching || initial) {
			podGroupInformers.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		if watching {
			w.WriteHeader(http.StatusOK)
			if initial {
				// A watch-list stream: no objects, then the bookmark that
				// ends the initial events.
				fmt.Fprintf(w, `{"type":"BOOKMARK","object":{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"1","annotations":{"k8s.io/initial-events-end":"true"}}}}`+"\n", name, apiVersion)
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		fmt.Fprintf(w, `{"kind":"%sList","apiVersion":%q,"metadata":{"resourceVersion":"1"},"items":[]}`, name, apiVersion)
	}))
	t.Cleanup(func() {
		cancel() // ends the informer's watch before the server waits for it
		srv.CloseClientConnections()
		srv.Close()
	})

	opts := options.NewOptions()
	opts.ConfigFile = file
	opts.Master = srv.URL
	opts.SecureServing.BindPort = 0
	cc, sched, err := app.Setup(ctx, opts, scheduler.RegistryOptions()...)
	if err != nil {
		return nil, nil, 0, err
	}
	plugins := map[string]*schedconfig.Plugins{}
	for name, fw := range sched.Profiles {
		plugins[name] = fw.ListPlugins()
	}
	return &cc.ComponentConfig, plugins, podGroupInformers.Load(), nil
}

func names(set schedconfig.PluginSet) []string {
	var out []string
	for _, p := range set.Enabled {
		out = append(out, p.Name)
	}
	return out
}

func TestShippedConfiguration(t *testing.T) {
	cfg, profiles, podGroupInformers, err := setup(t, configFile)
	require.NoError(t, err)
	require.EqualValues(t, 1, podGroupInformers, "the gang plugin and GPUFleet share one PodGroup informer")

	// The client limits must not cap binding (see the file's comment).
	require.EqualValues(t, 500, cfg.ClientConnection.QPS)
	require.EqualValues(t, 1000, cfg.ClientConnection.Burst)
	require.True(t, cfg.LeaderElection.LeaderElect)
	require.Equal(t, "gpu-gang-system", cfg.LeaderElection.ResourceNamespace)

	require.Len(t, profiles, 1)
	got, ok := profiles["gpu-gang"]
	require.True(t, ok, "the configuration must define the gpu-gang profile")

	// Which plugins run at each extension point, in order. The gang plugin
	// sorts the queue alone, gates the queue, and checks capacity and holds
	// plans after the in-tree filters and GPUFleet's GPU rules; default
	// preemption is off everywhere until it is gang-aware, so after DRA's
	// clean-up the gang plugin is the only PostFilter. RailFence's
	// PreFilter comes first: DynamicResources' reads the devices its
	// fence hides.
	want := map[string][]string{
		"QueueSort":  {"Coscheduling"},
		"PreEnqueue": {"SchedulingGates", "DynamicResources", "Coscheduling"},
		"PreFilter":  {"RailFence", "NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity", "DynamicResources", "NodeDeclaredFeatures", "GPUFleet", "Coscheduling"},
		"Filter":     {"NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity", "DynamicResources", "NodeDeclaredFeatures", "GPUFleet", "Coscheduling"},
		"PostFilter": {"DynamicResources", "Coscheduling"},
		"PreScore":   {"TaintToleration", "NodeAffinity", "NodeResourcesFit", "VolumeBinding", "PodTopologySpread", "InterPodAffinity", "NodeResourcesBalancedAllocation", "Coscheduling"},
		"Score":      {"TaintToleration", "NodeAffinity", "NodeResourcesFit", "VolumeBinding", "PodTopologySpread", "InterPodAffinity", "DynamicResources", "NodeResourcesBalancedAllocation", "ImageLocality", "Coscheduling"},
		"Reserve":    {"VolumeBinding", "DynamicResources", "Coscheduling"},
		"Permit":     {"Coscheduling"},
		"Bind":       {"DefaultBinder"},
	}
	points := map[string]schedconfig.PluginSet{
		"QueueSort": got.QueueSort, "PreEnqueue": got.PreEnqueue, "PreFilter": got.PreFilter, "Filter": got.Filter,
		"PostFilter": got.PostFilter, "PreScore": got.PreScore, "Score": got.Score, "Reserve": got.Reserve, "Permit": got.Permit, "Bind": got.Bind,
	}
	for point, wantNames := range want {
		if diff := cmp.Diff(wantNames, names(points[point])); diff != "" {
			t.Errorf("%s plugins (-want,+got):\n%s", point, diff)
		}
	}
	// Packing outweighs the stock spreading scores (see the file's comment).
	weights := map[string]int32{}
	for _, p := range got.Score.Enabled {
		weights[p.Name] = p.Weight
	}
	require.EqualValues(t, 10, weights["Coscheduling"])
	require.Greater(t, 50*weights["Coscheduling"], 100*(weights["NodeResourcesFit"]+weights["NodeResourcesBalancedAllocation"]+weights["ImageLocality"]),
		"the gap packing leaves between its first node and the rest must outweigh the spreading scores")
}

func TestInvalidPluginArgsFailStartup(t *testing.T) {
	data, err := os.ReadFile(configFile)
	require.NoError(t, err)
	tests := []struct {
		name    string
		replace [2]string
		wantErr string
	}{
		{
			name:    "zero wait",
			replace: [2]string{"permitWaitingTimeSeconds: 60", "permitWaitingTimeSeconds: 0"},
			wantErr: `pluginConfig[Coscheduling].args.permitWaitingTimeSeconds: Invalid value: 0`,
		},
		{
			name:    "max backoff below base",
			replace: [2]string{"podGroupMaxBackoffSeconds: 60", "podGroupMaxBackoffSeconds: 1"},
			wantErr: `pluginConfig[Coscheduling].args.podGroupMaxBackoffSeconds: Invalid value: 1: must be at least podGroupBackoffSeconds`,
		},
		{
			name:    "zero backoff",
			replace: [2]string{"podGroupBackoffSeconds: 2", "podGroupBackoffSeconds: 0"},
			wantErr: `pluginConfig[Coscheduling].args.podGroupBackoffSeconds: Invalid value: 0: must be at least 1`,
		},
		{
			name:    "negative claim release grace",
			replace: [2]string{"claimReleaseGraceSeconds: 60", "claimReleaseGraceSeconds: -1"},
			wantErr: `pluginConfig[Coscheduling].args.claimReleaseGraceSeconds: Invalid value: -1: must be at least 0`,
		},
		{
			name:    "consolidation enabled without a wait",
			replace: [2]string{"claimReleaseGraceSeconds: 60", "claimReleaseGraceSeconds: 60\n          consolidation: {enabled: true, waitingFor: 0s}"},
			wantErr: `pluginConfig[Coscheduling].args.consolidation.waitingFor: Invalid value: "0s": must be above 0 when consolidation is enabled`,
		},
		{
			name:    "misspelt field",
			replace: [2]string{"podGroupBackoffSeconds: 2", "podGroupBackofSeconds: 2"},
			wantErr: `unknown field "podGroupBackofSeconds"`,
		},
		{
			name:    "unknown unlabelled-nodes policy",
			replace: [2]string{"unlabelledNodes: Skip", "unlabelledNodes: Ignore"},
			wantErr: `pluginConfig[GPUFleet].args.unlabelledNodes: Unsupported value: "Ignore": supported values: "Skip", "Allow"`,
		},
		{
			name:    "capacity label that is no label key",
			replace: [2]string{"- node.kubernetes.io/lifecycle", "- node lifecycle"},
			wantErr: `pluginConfig[GPUFleet].args.capacityTypeLabels[3]: Invalid value: "node lifecycle": must be a node label key`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edited := strings.Replace(string(data), tt.replace[0], tt.replace[1], 1)
			require.NotEqual(t, string(data), edited, "the replacement must change the file")
			file := filepath.Join(t.TempDir(), "config.yaml")
			require.NoError(t, os.WriteFile(file, []byte(edited), 0o600))
			_, _, _, err := setup(t, file)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// Every plugin of every profile reads gangs from one source: the scheduler
// holds one PodGroup informer, whatever its profiles.
func TestOneGangSourcePerScheduler(t *testing.T) {
	data, err := os.ReadFile(configFile)
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(data, &cfg))
	profiles := cfg["profiles"].([]any)
	second := map[string]any{}
	for k, v := range profiles[0].(map[string]any) {
		second[k] = v
	}
	second["schedulerName"] = "gpu-gang-second"
	cfg["profiles"] = append(profiles, second)
	edited, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, edited, 0o600))

	_, plugins, podGroupInformers, err := setup(t, file)
	require.NoError(t, err)
	require.Len(t, plugins, 2)
	require.EqualValues(t, 1, podGroupInformers, "two profiles, two gang plugins and two GPUFleets, one PodGroup informer")
}
