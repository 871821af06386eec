#!/usr/bin/env bash
# Fails if a Go file of the main module is behind a build tag that `make
# verify` does not compile: a file behind a tag nothing builds rots unseen
# (test/bench did). Tags are the identifiers of //go:build lines outside the
# nested modules under hack/, negated ones left out (they build by default).
set -euo pipefail
cd "$(dirname "$0")/.."
known=" $* "
status=0
while IFS= read -r file; do
	line=$(grep -m1 '^//go:build ' "$file" || true)
	[[ -z "$line" ]] && continue
	for tag in $(sed -e 's#^//go:build ##' -e 's/[()|&]/ /g' <<<"$line"); do
		[[ "$tag" == !* ]] && continue
		if [[ "$known" != *" $tag "* ]]; then
			echo "$file: build tag $tag is not compiled by make verify (add it to VERIFY_TAGS)"
			status=1
		fi
	done
done < <(git ls-files '*.go' | grep -v '^hack/\(tools\|image\|helmtest\)/')
exit $status
