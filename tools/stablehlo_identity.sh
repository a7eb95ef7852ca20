#!/usr/bin/env bash
# Byte-for-byte identity of the kernel -> StableHLO emitter between BASE (default: main) and
# the working tree: runs the lowering and kernels test suites on both with
# TESSERA_STABLEHLO_SNAPSHOT (lowering/src/stablehlo/kernel/snapshot.rs), which writes every
# program they lower in every form, checked and unchecked, and compares the modules both sides
# wrote. BASE must have snapshot.rs. Refactors of the emitter land only when this prints
# "identical". Test outcomes do not matter here, but a test that cannot find a PJRT plugin may
# stop before it lowers its kernel: set TESSERA_CACHE_DIR (or TESSERA_PJRT_PLUGIN_CPU/_TPU)
# as the Makefile does, so that both sides lower every kernel.
#
#   tools/stablehlo_identity.sh [BASE]    (JOBS=n for cargo's -j, default 1)
set -euo pipefail
base=${1:-main}
root=$(git rev-parse --show-toplevel)
out=$(mktemp -d)
git -C "$root" worktree add --detach "$out/base" "$base" >/dev/null
trap 'git -C "$root" worktree remove --force "$out/base"' EXIT
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}

snapshot() { # $1: the tree, $2: the snapshot folder
  mkdir -p "$2"
  (cd "$1" && TESSERA_STABLEHLO_SNAPSHOT="$2" cargo test -j "${JOBS:-1}" --no-fail-fast \
    -p tessera-lowering -p tessera-kernels >"$2.log" 2>&1) || true
}
snapshot "$out/base" "$out/old"
# Both trees build into one target dir, and cargo judges freshness by mtime: the base's build
# is newer than the tree's own edits, so without this the tree's side reuses the base's
# artifacts and compares BASE with itself.
{ git -C "$root" diff --name-only "$base"; git -C "$root" ls-files -o --exclude-standard; } |
  (cd "$root" && xargs -r touch -c)
snapshot "$root" "$out/new"

same=0 differ=0
for f in "$out"/new/*; do
  name=$(basename "$f")
  [ -e "$out/old/$name" ] || continue # a kernel only the new tests lower
  if cmp -s "$f" "$out/old/$name"; then
    same=$((same + 1))
  else
    differ=$((differ + 1))
    echo "differs: $name (diff $out/old/$name $f)"
  fi
done
only_old=$(comm -23 <(ls "$out/old") <(ls "$out/new") | wc -l)
echo "$same modules compared, $differ differ, $only_old lowered only by BASE's tests (logs in $out)"
[ "$same" -gt 0 ] && [ "$differ" -eq 0 ] && echo identical
