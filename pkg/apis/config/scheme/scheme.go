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
	return decodeArgs(obj, path, "CoschedulingArgs", validation.ValidateCoschedulingArgs)
}

// DecodeGPUFleetArgs is DecodeCoschedulingArgs for the GPUFleet plugin's
// args.
func DecodeGPUFleetArgs(obj runtime.Object, path *field.Path) (*config.GPUFleetArgs, error) {
	return decodeArgs(obj, path, "GPUFleetArgs", validation.ValidateGPUFleetArgs)
}

// decodeArgs decodes, defaults and validates the args of kind, internal type
// T, from what kube-scheduler passes a plugin's New.
func decodeArgs[T runtime.Object](obj runtime.Object, path *field.Path, kind string, validate func(*field.Path, T) field.ErrorList) (T, error) {
	var zero T
	raw := []byte("{}")
	switch o := obj.(type) {
	case nil:
	case *runtime.Unknown:
		if len(o.Raw) > 0 {
			raw = o.Raw
		}
	case T:
		return o, validate(path, o).ToAggregate()
	default:
		return zero, fmt.Errorf("%s: want %s, got %T", path, kind, obj)
	}
	gvk := configv1.SchemeGroupVersion.WithKind(kind)
	decoded, _, err := Codecs.UniversalDecoder().Decode(raw, &gvk, nil)
	if err != nil {
		return zero, fmt.Errorf("%s: decoding %s: %w", path, kind, err)
	}
	args, ok := decoded.(T)
	if !ok {
		return zero, fmt.Errorf("%s: want %s, got %T", path, kind, decoded)
	}
	if errs := validate(path, args); len(errs) > 0 {
		return zero, errs.ToAggregate()
	}
	return args, nil
}
