#!/usr/bin/env bash
# Regenerates zz_generated.deepcopy.go next to the types of every package under
# pkg/apis (plugin args) that asks for it with +kubebuilder:object:generate,
# +kubebuilder:object:root or +k8s:deepcopy-gen markers, and removes those
# files from packages that no longer ask for one.
#
# Usage: hack/update-deepcopy.sh [OUTPUT_ROOT]
# OUTPUT_ROOT defaults to the repository root; verify-generated.sh passes a
# temp dir.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/tools.sh"

out_root="${1:-$GPU_GANG_ROOT}"
apis_dir=pkg/apis
out_file=zz_generated.deepcopy.go

cd "$GPU_GANG_ROOT"
if [[ ! -d "$apis_dir" ]]; then
  echo "update-deepcopy: ${apis_dir} does not exist; nothing to generate" >&2
  exit 0
fi

controller_gen="$(tools::ensure controller-gen)"

packages="$(go list -f '{{.Dir}}' "./${apis_dir}/...")"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# output:object:dir puts every package's file in one flat dir, so run
# controller-gen once per package to keep each file next to its types.
while IFS= read -r dir; do
  [[ -n "$dir" ]] || continue
  rel="${dir#"$GPU_GANG_ROOT"/}"
  "$controller_gen" object:headerFile=hack/boilerplate.go.txt paths="./${rel}" output:object:dir="${tmp}/${rel}"
done <<<"$packages"

# Remove files of packages that no longer ask for deepcopy, then move the new
# ones into place, leaving unchanged files (and their mtimes) alone.
if [[ -d "${out_root}/${apis_dir}" ]]; then
  (cd "$out_root" && find "$apis_dir" -type f -name "$out_file") | while IFS= read -r f; do
    if [[ ! -f "${tmp}/${f}" ]]; then
      rm -f "${out_root}/${f}"
      echo "update-deepcopy: removed $(tools::display_path "${out_root}/${f}")" >&2
    fi
  done
fi
(cd "$tmp" && find . -type f -name "$out_file" -printf '%P\n') | while IFS= read -r f; do
  if cmp -s "${tmp}/${f}" "${out_root}/${f}"; then
    continue
  fi
  mkdir -p "$(dirname "${out_root}/${f}")"
  mv -f "${tmp}/${f}" "${out_root}/${f}"
  echo "update-deepcopy: wrote $(tools::display_path "${out_root}/${f}")" >&2
done
