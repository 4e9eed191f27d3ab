#!/bin/sh
# hnsplan-pr.sh INTENT_DIR BASE_REF OUT.md
#
# What CI runs on a pull request: vet the intent (fail on any error), then
# diff it against the base branch and write the markdown for a PR comment.
# Prints "changes=true" or "changes=false" (for $GITHUB_OUTPUT); exits 1
# only on an error, not on changes.
set -eu
intent=$1 base=$2 out=$3

hnsplan vet --severity warning "$intent"

set +e
hnsplan diff --base "$base" "$intent" -o markdown --detailed-exitcode >"$out"
rc=$?
set -e
case $rc in
0) echo "changes=false" ;;
2) echo "changes=true" ;;
*) exit "$rc" ;;
esac
