#!/usr/bin/env bash
# The e2e helpers themselves (lib.sh): each test's scratch folder $WORK is made under TMPDIR
# (/tmp when it is unset or empty), and removed when the test exits.
source "$(dirname "$0")/lib.sh"
LIB="$SLATE_SOURCE_DIR/tests/e2e/lib.sh"
# work_of TMPDIR_VALUE|-: the $WORK a script sourcing lib.sh gets (- : TMPDIR unset), on stdout;
# it must not exist any more once that script has exited.
work_of() {
  local w
  if [ "$1" = - ]; then w=$(env -u TMPDIR bash -c 'source "$1"; echo "$WORK"' _ "$LIB")
  else w=$(TMPDIR=$1 bash -c 'source "$1"; echo "$WORK"' _ "$LIB"); fi
  if [ -e "$w" ]; then echo "left behind: $w"; else echo "$w"; fi
}
fresh="$WORK/tmpdir"
mkdir "$fresh"
w=$(work_of "$fresh")
check "WORK is made under TMPDIR ($w) and removed at exit" \
  bash -c '[[ $1 == "$2"/slate-e2e.* && $1 != *"left behind"* ]]' _ "$w" "$fresh"
w=$(work_of "$fresh/")
check "a TMPDIR ending in / gives one slash ($w)" \
  bash -c '[[ $1 == "$2"/slate-e2e.* ]]' _ "$w" "$fresh"
w=$(work_of "")
check "an empty TMPDIR means /tmp ($w)" bash -c '[[ $1 == /tmp/slate-e2e.* ]]' _ "$w"
w=$(work_of -)
check "no TMPDIR means /tmp ($w)" bash -c '[[ $1 == /tmp/slate-e2e.* ]]' _ "$w"
check "nothing is left in the fresh TMPDIR" bash -c '[ -z "$(ls -A "$1")" ]' _ "$fresh"
finish
