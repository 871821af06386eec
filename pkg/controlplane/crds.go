package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// crdServedTimeout bounds the wait for a new CRD to be established and
// answer requests.
const crdServedTimeout = time.Minute

// InstallCRDs creates, or updates, the CustomResourceDefinitions in the YAML
// files (one or more documents each) and waits until each is Established and
// every served version answers a list request.
func (cp *ControlPlane) InstallCRDs(ctx context.Context, files ...string) error {
	return InstallCRDs(ctx, cp.RESTConfig(), files...)
}

// InstallCRDs is ControlPlane.InstallCRDs for the API server cfg points at.
func InstallCRDs(ctx context.Context, cfg *rest.Config, files ...string) error {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, file := range files {
		fromFile, err := readCRDs(file)
		if err != nil {
			return err
		}
		crds = append(crds, fromFile...)
	}

	jsonCfg := JSONConfig(cfg)
	client, err := apiextensionsclient.NewForConfig(jsonCfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(jsonCfg)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if err := applyCRD(ctx, client, crd); err != nil {
			return err
		}
	}
	for _, crd := range crds {
		if err := waitCRDServed(ctx, client, dyn, crd); err != nil {
			return err
		}
		klog.FromContext(ctx).V(1).Info("CRD is served", "crd", crd.Name)
	}
	return nil
}

// readCRDs decodes every non-empty YAML document of file as a CRD.
func readCRDs(file string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := decoder.Decode(crd); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("decoding %s: %w", file, err)
		}
		if crd.Name == "" && crd.Kind == "" {
			continue // an empty document, such as after a leading "---"
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: document %q is a %s, not a CustomResourceDefinition", file, crd.Name, crd.Kind)
		}
		crds = append(crds, crd)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("%s holds no CustomResourceDefinition", file)
	}
	return crds, nil
}

func applyCRD(ctx context.Context, client apiextensionsclient.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	_, err := crds.Create(ctx, crd, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		return nil
	}
	existing, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading CRD %s: %w", crd.Name, err)
	}
	update := crd.DeepCopy()
	update.ResourceVersion = existing.ResourceVersion
	if _, err := crds.Update(ctx, update, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating CRD %s: %w", crd.Name, err)
	}
	return nil
}

// waitCRDServed waits until crd is Established with its names accepted and
// each served version answers a list: Established alone does not mean the
// resource's handler and discovery are in place yet.
func waitCRDServed(ctx context.Context, client apiextensionsclient.Interface, dyn dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, crdServedTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			lastErr = err
			return false, nil
		}
		if !crdCondition(got, apiextensionsv1.Established) || !crdCondition(got, apiextensionsv1.NamesAccepted) {
			lastErr = fmt.Errorf("CRD %s is not established yet", crd.Name)
			return false, nil
		}
		for _, v := range got.Spec.Versions {
			if !v.Served {
				continue
			}
			gvr := schema.GroupVersionResource{Group: got.Spec.Group, Version: v.Name, Resource: got.Spec.Names.Plural}
			if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
				lastErr = fmt.Errorf("listing %s: %w", gvr, err)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for CRD %s to be served: %w (last: %v)", crd.Name, err, lastErr)
	}
	return nil
}

func crdCondition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == t {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
