# Shared by the ci/ scripts: configure + build + ctest one configuration.
# usage: tg_build_and_test BUILD_DIR "CMAKE ARGS..." [ctest args...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
JOBS=${TG_JOBS:-$(nproc)}
tg_build_and_test() {
  local dir=$1 args=$2
  shift 2
  # shellcheck disable=SC2086
  cmake -S . -B "$dir" $args >/dev/null
  cmake --build "$dir" -j"$JOBS"
  ctest --test-dir "$dir" --output-on-failure -j"$JOBS" "$@"
}
