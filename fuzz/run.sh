#!/usr/bin/env bash
# Builds every fuzz target and runs each for N seconds (default 60): `fuzz/run.sh [SECONDS] [TARGET...]`.
# Needs a nightly toolchain (or stable with RUSTC_BOOTSTRAP=1, used automatically when no nightly
# is installed) and cargo-fuzz, which this script installs from crates.io when it is missing.
# Crashing inputs land in fuzz/artifacts/<target>/; copy each into fuzz/regressions/<target>/ so
# the regression test (`cargo test -p stellflow-proto --test fuzz_regressions`) replays it.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-60}
shift || true
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  toolchain=(+nightly)
else
  toolchain=()
  export RUSTC_BOOTSTRAP=1
fi
mapfile -t known < <(cargo "${toolchain[@]}" fuzz list)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=("${known[@]}")
fi
# Check every name before fuzzing any, so a typo (or `checks`, the targets' shared module)
# fails at once instead of after the targets before it have run.
for t in "${targets[@]}"; do
  if ! printf '%s\n' "${known[@]}" | grep -qx -- "$t"; then
    echo "fuzz/run.sh: no fuzz target named '$t'; the targets are: ${known[*]}" >&2
    exit 2
  fi
done
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  if [ -d "regressions/$t" ]; then cp -n regressions/"$t"/* "corpus/$t/" 2>/dev/null || true; fi
  echo "== fuzzing $t for ${secs}s"
  cargo "${toolchain[@]}" fuzz run "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536
done
echo "fuzz: all targets ran ${secs}s without a crash"
