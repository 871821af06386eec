// Package v1alpha1 is the PodGroup of scheduling.x-k8s.io/v1alpha1 as
// gpu-gang's PodGroup status controller reads and writes it.
//
// The API belongs to scheduler-plugins, and Kubeflow training-operator,
// Trainer v2 and MPI Operator write it with scheduler-plugins' Go types.
// Those types have no status conditions and no observedGeneration, which
// Kubernetes API conventions ask of a status. This package adds exactly
// those two fields, both optional, and nothing else:
//
//   - The spec is scheduler-plugins' PodGroupSpec, and the status embeds
//     scheduler-plugins' PodGroupStatus inline, so every field keeps its
//     name, type and meaning on the wire.
//   - hack/update-crds.sh generates the CRD from scheduler-plugins' types and
//     then adds the schema of Status.Conditions and
//     Status.ObservedGeneration, generated from this package, to the CRD's
//     status. A cluster with this CRD serves both kinds of client.
//   - Clients built on scheduler-plugins' types ignore the two fields when
//     they decode, and the status subresource keeps their spec updates from
//     touching status, so operators cannot drop conditions the controller
//     wrote.
//
// Use this package only for clients that must see the two fields (the
// status controller, tests); the scheduler plugin reads PodGroups with
// scheduler-plugins' own clientset.
//
// +kubebuilder:object:generate=true
// +groupName=scheduling.x-k8s.io
// +versionName=v1alpha1
package v1alpha1
