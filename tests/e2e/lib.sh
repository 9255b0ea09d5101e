# lib.sh - shared helpers for the end-to-end tests (sourced). Each test gets $SLATE (the CLI),
# $SLATE_MODELS_DIR, $SLATE_SOURCE_DIR from ctest; PY is Debian's python3 (it has numpy).
set -euo pipefail
: "${SLATE:?SLATE (the CLI binary) must be set}"
: "${SLATE_MODELS_DIR:?}"
: "${SLATE_SOURCE_DIR:?}"
PY=/usr/bin/python3
TOOLS="$SLATE_SOURCE_DIR/tests/tools"
WORK=$(mktemp -d /tmp/slate-e2e.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
N_PASS=0
N_FAIL=0

ok() { N_PASS=$((N_PASS + 1)); echo "ok   - $*"; }
bad() { N_FAIL=$((N_FAIL + 1)); echo "FAIL - $*"; }
check() { # check "description" command...
  local d=$1; shift
  if "$@"; then ok "$d"; else bad "$d"; fi
}
# expect_fail "description" STATUS_NAME MESSAGE_SUBSTRING command...: the command must exit
# non-zero and print the status name and the substring on stderr.
expect_fail() {
  local d=$1 st=$2 msg=$3; shift 3
  local out
  if out=$("$@" 2>&1 >/dev/null); then bad "$d (exited 0)"; return; fi
  if [[ $out == *"$st"* && $out == *"$msg"* ]]; then ok "$d"; else bad "$d: got: $out"; fi
}
need_models() {
  if [ ! -d "$SLATE_MODELS_DIR/stories260K" ]; then
    echo "skipping: $SLATE_MODELS_DIR/stories260K not found"
    exit 0
  fi
}
finish() {
  echo "$N_PASS passed, $N_FAIL failed"
  [ "$N_FAIL" -eq 0 ]
}
