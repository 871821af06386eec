// Package rbactest proves the install's RBAC on a real API server: it
// starts kube-apiserver in-process with RBAC authorization, creates the
// service accounts, roles and bindings that `kubectl apply -k manifests/`
// creates, and runs gpu-gang's scheduler and status controller each as its
// own service account, doing its job.
// What manifests/deploy_test.go checks verb by verb, this checks by use: a
// missing rule fails a component here, an extra one fails the verb test.
//
// It links kube-apiserver, so `make test-integration` runs it, without the
// race detector, beside test/integration.
package rbactest
