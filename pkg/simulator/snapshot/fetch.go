package snapshot

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"
)

// podGroups is the PodGroup resource gpu-gang schedules.
var podGroups = v1alpha1.SchemeGroupVersion.WithResource("podgroups")

// FetchFromKubeconfig takes a snapshot of the cluster the kubeconfig file
// points at (its current context): the v1 List that Command prints.
func FetchFromKubeconfig(ctx context.Context, kubeconfig string) ([]byte, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = "gpu-gang-simulator"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return FetchList(ctx, kube, dyn)
}

// FetchList lists nodes, pods and PodGroups of every namespace, of both
// APIs, and the DRA objects DRACommand adds, and renders them as one v1
// List in YAML, as NativeCommand and DRACommand do. A
// cluster without the PodGroup CRD, or that does not serve Kubernetes' own
// PodGroups, simply has no such gangs.
func FetchList(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface) ([]byte, error) {
	list := &metav1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		n.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
		if err := add(list, n); err != nil {
			return nil, err
		}
	}
	pods, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
		if err := add(list, p); err != nil {
			return nil, err
		}
	}
	groups, err := dyn.Resource(podGroups).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
	case err != nil:
		return nil, fmt.Errorf("listing %s: %w", schema.GroupResource{Group: podGroups.Group, Resource: podGroups.Resource}, err)
	default:
		for i := range groups.Items {
			g := &groups.Items[i]
			g.SetAPIVersion(v1alpha1.SchemeGroupVersion.String())
			g.SetKind("PodGroup")
			if err := add(list, g); err != nil {
				return nil, err
			}
		}
	}
	native, err := kube.SchedulingV1beta1().PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
	case err != nil:
		return nil, fmt.Errorf("listing %s podgroups: %w", schedulingv1beta1.SchemeGroupVersion, err)
	default:
		for i := range native.Items {
			g := &native.Items[i]
			g.TypeMeta = metav1.TypeMeta{APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "PodGroup"}
			if err := add(list, g); err != nil {
				return nil, err
			}
		}
	}
	if err := fetchDRA(ctx, kube, list); err != nil {
		return nil, err
	}
	return yaml.Marshal(list)
}

func add(list *metav1.List, obj runtime.Object) error {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	if n, ok := obj.(*v1.Node); ok {
		// Images are most of a node's size and of no use here.
		n.Status.Images = nil
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	list.Items = append(list.Items, runtime.RawExtension{Raw: data})
	return nil
}
