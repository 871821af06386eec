// Package scheme decodes gpu-gang's plugin arguments.
//
// kube-scheduler hands an out-of-tree plugin the raw JSON of its pluginConfig
// entry (a *runtime.Unknown), because only in-tree argument types are in its
// conversion scheme. This package decodes that JSON strictly against the v1
// types, applies defaults, converts to the internal form and validates it.
package scheme

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	configv1 "github.com/gpu-gang/gpu-gang/pkg/apis/config/v1"
	"github.com/gpu-gang/gpu-gang/pkg/apis/config/validation"
)

var (
	// Scheme holds the internal and v1 argument types.
	Scheme = runtime.NewScheme()
	// Codecs decodes strictly: an unknown or misspelt field is an error.
	Codecs = serializer.NewCodecFactory(Scheme, serializer.EnableStrict)
)

func init() {
	utilruntime.Must(config.AddToScheme(Scheme))
	utilruntime.Must(configv1.AddToScheme(Scheme))
	utilruntime.Must(Scheme.SetVersionPriority(configv1.SchemeGroupVersion))
}

// DecodeCoschedulingArgs turns what kube-scheduler passes a plugin's New into
// defaulted, validated internal args. A nil object (no pluginConfig entry)
// yields the defaults. path names the args in errors, e.g.
// profiles[0].pluginConfig[0].args.
func DecodeCoschedulingArgs(obj runtime.Object, path *field.Path) (*config.CoschedulingArgs, error) {
	raw := []byte("{}")
	switch o := obj.(type) {
	case nil:
	case *runtime.Unknown:
		if len(o.Raw) > 0 {
			raw = o.Raw
		}
	case *config.CoschedulingArgs:
		return o, validation.ValidateCoschedulingArgs(path, o).ToAggregate()
	default:
		return nil, fmt.Errorf("%s: want CoschedulingArgs, got %T", path, obj)
	}
	gvk := configv1.SchemeGroupVersion.WithKind("CoschedulingArgs")
	decoded, _, err := Codecs.UniversalDecoder().Decode(raw, &gvk, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: decoding CoschedulingArgs: %w", path, err)
	}
	args, ok := decoded.(*config.CoschedulingArgs)
	if !ok {
		return nil, fmt.Errorf("%s: want CoschedulingArgs, got %T", path, decoded)
	}
	if errs := validation.ValidateCoschedulingArgs(path, args); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return args, nil
}

// DecodeGPUFleetArgs is DecodeCoschedulingArgs for the GPUFleet plugin's
// args.
func DecodeGPUFleetArgs(obj runtime.Object, path *field.Path) (*config.GPUFleetArgs, error) {
	raw := []byte("{}")
	switch o := obj.(type) {
	case nil:
	case *runtime.Unknown:
		if len(o.Raw) > 0 {
			raw = o.Raw
		}
	case *config.GPUFleetArgs:
		return o, validation.ValidateGPUFleetArgs(path, o).ToAggregate()
	default:
		return nil, fmt.Errorf("%s: want GPUFleetArgs, got %T", path, obj)
	}
	gvk := configv1.SchemeGroupVersion.WithKind("GPUFleetArgs")
	decoded, _, err := Codecs.UniversalDecoder().Decode(raw, &gvk, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: decoding GPUFleetArgs: %w", path, err)
	}
	args, ok := decoded.(*config.GPUFleetArgs)
	if !ok {
		return nil, fmt.Errorf("%s: want GPUFleetArgs, got %T", path, decoded)
	}
	if errs := validation.ValidateGPUFleetArgs(path, args); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return args, nil
}
