#!/usr/bin/env bash
# Bazel's --workspace_status_command (.bazelrc): the commit that //:bundle
# records in its COMMIT file; "-dirty" when the tree has uncommitted changes.
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ "$commit" != unknown ] && ! git diff --quiet HEAD -- 2>/dev/null; then
  commit="$commit-dirty"
fi
echo "STABLE_GIT_COMMIT $commit"
