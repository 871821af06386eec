#!/usr/bin/env bash
# Fails if any generated file in the repo differs from what its generator
# produces now. Each generator regenerates into a temp dir; the files it owns
# must then be identical there and in the repo, with none missing on either
# side.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"

# One entry per generator: "<update script>|<dir>|<file name pattern>". The
# script takes the output root as its only argument and owns every file under
# <dir> whose name matches <file name pattern>.
generators=(
  "hack/update-crds.sh|manifests/crds|scheduling.x-k8s.io_podgroups.yaml"
  "hack/update-deepcopy.sh|pkg/apis|zz_generated.deepcopy.go"
)

# owned_files ROOT DIR PATTERN: the matching files under ROOT/DIR, relative to ROOT.
owned_files() {
  if [[ -d "$1/$2" ]]; then
    (cd "$1" && find "$2" -type f -name "$3" | LC_ALL=C sort)
  fi
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

stale=()
for entry in "${generators[@]}"; do
  IFS='|' read -r script dir pattern <<<"$entry"
  out="${tmp}/$(basename "$script" .sh)"
  mkdir -p "$out"
  if ! "${root}/${script}" "$out"; then
    echo "verify-generated: ${script} failed; fix the error above first" >&2
    exit 1
  fi
  drift=0
  # Files generated but not committed, or committed but no longer generated.
  diff -u --label "repo: ${dir}" --label "generated: ${dir}" \
    <(owned_files "$root" "$dir" "$pattern") <(owned_files "$out" "$dir" "$pattern") || drift=1
  while IFS= read -r f; do
    if [[ -f "${root}/${f}" ]]; then
      diff -u --label "repo: $f" --label "generated: $f" "${root}/${f}" "${out}/${f}" || drift=1
    fi
  done < <(owned_files "$out" "$dir" "$pattern")
  if ((drift)); then
    stale+=("$script")
  fi
done

if ((${#stale[@]})); then
  echo >&2
  echo "verify-generated: generated files are out of date. Run:" >&2
  printf '  %s\n' "${stale[@]}" >&2
  exit 1
fi
echo "verify-generated: all generated files are up to date" >&2
