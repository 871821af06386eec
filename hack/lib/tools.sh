# shellcheck shell=bash
# Sourced by hack/*.sh: builds the tools pinned in hack/tools/go.mod into bin/.

GPU_GANG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
GPU_GANG_BIN="${GPU_GANG_ROOT}/bin"
GPU_GANG_TOOLS_MODULE="${GPU_GANG_ROOT}/hack/tools"

# Binary name -> main package. Each package must also be imported in
# its tools module's tools.go so that go.mod pins its version.
declare -A GPU_GANG_TOOLS=(
  [controller-gen]=sigs.k8s.io/controller-tools/cmd/controller-gen
  [kwok]=sigs.k8s.io/kwok/cmd/kwok
  [training-operator]=github.com/kubeflow/training-operator/cmd/training-operator.v1
)

# Binary name -> tools module, for tools that cannot share hack/tools: kwok
# is built against an older k8s.io release than controller-gen, and one module
# would force it onto the newer one. Tools not listed use hack/tools.
declare -A GPU_GANG_TOOL_MODULES=(
  [kwok]="${GPU_GANG_TOOLS_MODULE}/kwok"
  [training-operator]="${GPU_GANG_TOOLS_MODULE}/training-operator"
)

# tools::ensure NAME
# Builds tool NAME into bin/NAME if it is missing or stale, and prints its path.
# Stale means: built by another Go release, built from another version of its
# module, or older than its tools module's go.mod or go.sum.
tools::ensure() {
  local name="$1"
  local pkg="${GPU_GANG_TOOLS[$name]:-}"
  if [[ -z "$pkg" ]]; then
    echo "tools::ensure: unknown tool '$name' (add it to GPU_GANG_TOOLS in hack/lib/tools.sh)" >&2
    return 1
  fi
  local bin="${GPU_GANG_BIN}/${name}"
  local module="${GPU_GANG_TOOL_MODULES[$name]:-$GPU_GANG_TOOLS_MODULE}"
  local want have reason=""
  # "<go version> <module path> <module version>", as `go version -m` reports it.
  want="$(go env GOVERSION) $(cd "$module" && GOWORK=off go list -f '{{.Module.Path}} {{.Module.Version}}' "$pkg")"
  if [[ ! -x "$bin" ]]; then
    reason="missing"
  else
    have="$(go version -m "$bin" | awk 'NR == 1 { v = $2 } $1 == "mod" { m = $2 " " $3 } END { print v " " m }')"
    if [[ "$have" != "$want" ]]; then
      reason="have ${have}, want ${want}"
    elif [[ "${module}/go.mod" -nt "$bin" || "${module}/go.sum" -nt "$bin" ]]; then
      reason="$(tools::display_path "$module")/go.mod or go.sum changed"
    fi
  fi
  if [[ -n "$reason" ]]; then
    echo "building bin/${name} (${want}): ${reason}" >&2
    mkdir -p "$GPU_GANG_BIN"
    (cd "$module" && GOWORK=off go build -o "$bin" "$pkg")
  fi
  echo "$bin"
}

# tools::display_path PATH
# Prints PATH relative to the repo root when it is inside the repo, so that
# logs of an update into the repo and into a temp dir cannot be mistaken.
tools::display_path() {
  case "$1" in
    "${GPU_GANG_ROOT}"/*) echo "${1#"${GPU_GANG_ROOT}"/}" ;;
    *) echo "$1" ;;
  esac
}
