#!/bin/bash
# test_cli_help.sh - every command's --help: exits 0 on stdout, lists every option its parser
# accepts (read from the parser's source) and no option the parser lacks; -h and `slate help
# CMD` print the same; an unknown option and missing arguments exit 2 with a pointer to --help.
source "$(dirname "$0")/lib.sh"
SRC=$SLATE_SOURCE_DIR

# The commands main.c dispatches, and the file whose parser reads each one's options.
mapfile -t CMDS < <(grep -o '{"[a-z]*", [a-z_]*}' "$SRC/cli/main.c" | sed 's/{"\([a-z]*\)".*/\1/')
check "main.c dispatches the ten commands" test "${#CMDS[@]}" -eq 10
parser_of() { if [ "$1" = serve ]; then echo "$SRC/server/http.c"; else echo "$SRC/cli/$1.c"; fi; }

top=$("$SLATE" --help)
n_opts=0
for c in "${CMDS[@]}"; do
  check "slate --help lists $c" grep -qE "^  $c( |$)" <<<"$top"

  rc=0; help=$("$SLATE" "$c" --help 2>"$WORK/err") || rc=$?
  check "$c --help exits 0" test "$rc" -eq 0
  check "$c --help writes nothing on stderr" test ! -s "$WORK/err"
  check "$c --help starts with its usage" grep -q "^usage: slate $c" <<<"${help%%$'\n'*}"
  check "$c -h prints the same" test "$("$SLATE" "$c" -h)" = "$help"
  check "slate help $c prints the same" test "$("$SLATE" help "$c")" = "$help"
  check "$c --help after other arguments prints the same" \
    test "$("$SLATE" "$c" model.slate -n 3 --help)" = "$help"

  # Options the parser compares arguments against: strcmp(a, "--x") / strcmp(argv[i], "--x").
  mapfile -t opts < <(grep -oE 'strcmp\((a|argv\[i\]), "-[-a-z0-9]+"\)' "$(parser_of "$c")" |
                      grep -oE '"-[-a-z0-9]+"' | tr -d '"' | sort -u)
  n_opts=$((n_opts + ${#opts[@]}))
  missing=""
  for o in "${opts[@]}"; do
    grep -qE -- "(^|[ ,|])$o([ ,=|]|$)" <<<"$help" || missing="$missing $o"
  done
  check "$c --help lists every option its parser accepts${missing:+ (missing:$missing)}" test -z "$missing"

  # Options the help lists at the start of a line: each must be one the parser knows.
  mapfile -t listed < <(grep -oE '^  (-[a-z], )?--?[a-z][-a-z0-9]*' <<<"$help" | grep -oE -- '--?[a-z][-a-z0-9]*')
  extra=""
  for o in "${listed[@]}"; do
    # (a here-string, not printf | grep -q: under pipefail, grep -q exiting at the first match
    # can kill printf with SIGPIPE and fail the pipeline, naming a listed option as unknown)
    grep -qxF -- "$o" <<<"$(printf '%s\n' "${opts[@]}")" || extra="$extra $o"
  done
  check "$c --help lists only options its parser accepts${extra:+ (unknown:$extra)}" test -z "$extra"

  rc=0; "$SLATE" "$c" --no-such-option >/dev/null 2>"$WORK/err" || rc=$?
  check "$c --no-such-option exits 2" test "$rc" -eq 2
  check "$c --no-such-option names it and points at --help" \
    grep -q -- "--no-such-option.*slate $c --help" "$WORK/err"

  rc=0; "$SLATE" "$c" >/dev/null 2>"$WORK/err" || rc=$?
  check "$c without arguments exits 2" test "$rc" -eq 2
  check "$c without arguments prints its usage and the --help pointer" \
    bash -c 'grep -q "^usage: slate '"$c"'" "$1" && grep -q "slate '"$c"' --help" "$1"' _ "$WORK/err"
done

# Guards the grep above: the parsers do compare against this many options.
check "the parsers' options were found ($n_opts)" test "$n_opts" -ge 80
rc=0; "$SLATE" help no-such-command >/dev/null 2>&1 || rc=$?
check "slate help on an unknown command exits 2" test "$rc" -eq 2
rc=0; "$SLATE" >/dev/null 2>&1 || rc=$?
check "slate without a command exits 2" test "$rc" -eq 2
finish
