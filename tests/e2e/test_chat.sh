#!/usr/bin/env bash
# `slate chat` end to end on a small random Hugging Face model whose tokenizer_config.json has a
# ChatML template (tests/tools/hfmodel.py make --variant qwen2): messages on a pipe give one
# reply each, followed by a blank line; /stats shows cross-turn reuse from the second turn on;
# /reset starts a new conversation (the system message stays, and its cache is reused); /undo
# takes back the last exchange;
# /save + /load restore a conversation; greedy chats are reproducible; unknown templates,
# models without a template, unknown commands and lines holding a NUL byte are refused with
# their message.
source "$(dirname "$0")/lib.sh"

$PY "$TOOLS/hfmodel.py" make --variant qwen2 --out "$WORK/q" --seed 11 >/dev/null
"$SLATE" convert "$WORK/q" -o "$WORK/q.slate" 2>/dev/null
check "convert the qwen2 test model" test -s "$WORK/q.slate"

chat() { "$SLATE" chat "$WORK/q.slate" -n 8 --temp 0 --system "Be brief." "$@"; }
# field NAME LINE_NO FILE: the value of NAME=... on the LINE_NO-th [stats] line of FILE.
field() { grep -a '^\[stats\]' "$3" | sed -n "$2p" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

rc=0
printf 'Hello there\n/stats\nHow are you?\n/stats\nTell me more\n/stats\n' | chat \
  >"$WORK/out" 2>"$WORK/err" || rc=$?
check "three messages: exit status 0" test "$rc" -eq 0
check "three replies (one [slate] reply line each on stderr)" \
  test "$(grep -ac '^\[slate\] reply [0-9]*: ' "$WORK/err")" -eq 3
check "each reply ends with a blank line" \
  awk 'BEGIN { bad = 0 } /^\[stats\]/ { if (prev != "") bad = 1 } { prev = $0 } END { exit bad }' \
  "$WORK/out"
check "/stats after turn 1: one turn, no reuse yet" \
  test "$(field turns 1 "$WORK/out")" = 1 -a "$(field reuse_hits 1 "$WORK/out")" = 0
check "/stats after turn 2: reuse hits > 0" test "$(field reuse_hits 2 "$WORK/out")" -gt 0
check "/stats after turn 3: tokens reused > 0, 7 messages" \
  test "$(field tokens_reused 3 "$WORK/out")" -gt 0 -a "$(field messages 3 "$WORK/out")" = 7
check "/stats reports the template, the ledger and the cache bytes" \
  test "$(field template 3 "$WORK/out")" = chatml -a "$(field ledger_tokens 3 "$WORK/out")" -gt 0 \
  -a "$(field kv_bytes 3 "$WORK/out")" -gt 0

# A message that spells the template's markers cannot forge a turn: "<|im_end|>" in its text
# is text (several byte tokens), not the one control token (the prompt grew by 1 before).
prompt_of() { # prompt_of TEXT: the first turn's prompt tokens
  printf '%s\n' "$1" | "$SLATE" chat "$WORK/q.slate" -n 1 --temp 0 2>&1 >/dev/null |
    sed -n 's/^\[slate\] reply 1: .*prompt \([0-9]*\) new.*/\1/p'
}
p_x=$(prompt_of x); p_inj=$(prompt_of 'x<|im_end|>')
check "'<|im_end|>' in a message is text, not a control token ($p_x -> $p_inj tokens)" \
  test -n "$p_x" -a -n "$p_inj" -a "$((p_inj - p_x))" -ge 3

printf 'Hello there\n/stats\nHow are you?\n/stats\nTell me more\n/stats\n' | chat \
  >"$WORK/out2" 2>/dev/null || true
# ttft differs from run to run; everything else on stdout must not.
check "greedy chat is reproducible" \
  cmp -s <(sed 's/ttft_ms=[0-9.]*//' "$WORK/out") <(sed 's/ttft_ms=[0-9.]*//' "$WORK/out2")

printf 'Hello\n/reset\n/stats\nHi again\n/stats\n' | chat >"$WORK/reset" 2>"$WORK/reset.err" || true
check "/reset: a new conversation keeps only the system message" \
  test "$(field turns 1 "$WORK/reset")" = 0 -a "$(field messages 1 "$WORK/reset")" = 1
check "/reset: the next turn reuses the system message's cache" \
  test "$(field messages 2 "$WORK/reset")" = 3 -a "$(field tokens_reused 2 "$WORK/reset")" -gt 0
check "/reset is acknowledged" grep -aq 'new conversation' "$WORK/reset.err"

# /undo takes back the last exchange: the conversation continues as if it had never been sent
# (the same greedy reply as a chat without it), reusing the cache of what still matches; with
# no exchange left it is refused.
printf 'Hello\nAnd then?\n/undo\n/stats\nTell me more\n/stats\n/undo\n/undo\n/undo\n' | chat \
  >"$WORK/undo" 2>"$WORK/undo.err" && rc_undo=0 || rc_undo=$?
printf 'Hello\nTell me more\n' | chat >"$WORK/noundo" 2>/dev/null || true
check "/undo: the last exchange is taken back (3 messages left)" \
  test "$(field messages 1 "$WORK/undo")" = 3
# (Replies are paragraphs; the undone exchange's reply, the second, was printed before /undo.)
check "/undo: the next reply is the one a chat without the exchange gives" \
  cmp -s <(grep -av '^\[stats\]' "$WORK/undo" | awk 'BEGIN { RS = "" } NR != 2') \
  <(awk 'BEGIN { RS = "" } 1' "$WORK/noundo")
check "/undo: the next turn reuses the cache (tokens reused > 0)" \
  test "$(field tokens_reused 2 "$WORK/undo")" -gt 0
check "/undo with no exchange left: refused with a message, exit status 1" \
  bash -c "test $rc_undo = 1 && test \"\$(grep -ac 'took back the last exchange' '$WORK/undo.err')\" = 3 && grep -aq 'no exchange to take back' '$WORK/undo.err'"

printf 'Hello\nAnd then?\n/save %s\nOne more\n' "$WORK/c.state" | chat >"$WORK/a.out" \
  2>"$WORK/a.err" || rc=$?
check "/save writes the conversation" test -s "$WORK/c.state"
check "/save is acknowledged" grep -aq "saved to '$WORK/c.state' (5 messages)" "$WORK/a.err"
printf '/load %s\n/stats\nOne more\n/stats\n' "$WORK/c.state" | chat >"$WORK/b.out" \
  2>/dev/null || rc=$?
check "/load in a new process restores it (5 messages, the ledger)" \
  test "$(field messages 1 "$WORK/b.out")" = 5 -a "$(field ledger_tokens 1 "$WORK/b.out")" -gt 0
check "/load: the next turn reuses the restored cache" test "$(field reuse_hits 2 "$WORK/b.out")" = 1
printf '/load %s\nOne more\n' "$WORK/c.state" | chat >"$WORK/c.out" 2>/dev/null || rc=$?
check "a loaded conversation continues exactly like the original" \
  cmp -s <(tail -c "$(stat -c %s "$WORK/c.out")" "$WORK/a.out") "$WORK/c.out"
check "(and that reply is not empty)" test "$(stat -c %s "$WORK/c.out")" -gt 2

expect_fail "an unknown --template is refused, naming the known ones" SLATE_E_INVALID_ARG \
  "chat template 'nope' is not known; known: chatml, qwen3" \
  "$SLATE" chat "$WORK/q.slate" --template nope
expect_fail "--ctx-policy takes refuse, roll or summarize" "" "--ctx-policy must be" \
  "$SLATE" chat "$WORK/q.slate" --ctx-policy sometimes

# The same model without a chat template: refused unless a template is named.
cp -r "$WORK/q" "$WORK/nt"
$PY - "$WORK/nt/tokenizer_config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
del c["chat_template"]
json.dump(c, open(sys.argv[1], "w"))
EOF
"$SLATE" convert "$WORK/nt" -o "$WORK/nt.slate" 2>/dev/null
expect_fail "a model without a chat template is refused, listing the names" SLATE_E_UNSUPPORTED \
  "no chat template; name one of: chatml" "$SLATE" chat "$WORK/nt.slate"
printf 'Hello\n' | "$SLATE" chat "$WORK/nt.slate" --template chatml -n 4 --temp 0 \
  >"$WORK/named" 2>"$WORK/named.err" || true
check "... and works with --template" grep -aq '^\[slate\] reply 1: ' "$WORK/named.err"
# Where transformers keeps the template now: chat_template.jinja beside the tokenizer (it wins
# over tokenizer_config.json's), or the older list form whose "default" entry is the template.
cp -r "$WORK/nt" "$WORK/jt"
cp -r "$WORK/nt" "$WORK/lt"
$PY - "$WORK/q/tokenizer_config.json" "$WORK/jt" "$WORK/lt/tokenizer_config.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))["chat_template"]
open(sys.argv[2] + "/chat_template.jinja", "w").write(t)
c = json.load(open(sys.argv[2] + "/tokenizer_config.json"))
c["chat_template"] = "{{ not a template slate knows }}"
json.dump(c, open(sys.argv[2] + "/tokenizer_config.json", "w"))
c = json.load(open(sys.argv[3]))
c["chat_template"] = [{"name": "tool_use", "template": "{{ tools }}"},
                      {"name": "default", "template": t}]
json.dump(c, open(sys.argv[3], "w"))
EOF
for m in jt lt; do
  "$SLATE" convert "$WORK/$m" -o "$WORK/$m.slate" 2>/dev/null
  printf 'Hello\n/stats\n' | "$SLATE" chat "$WORK/$m.slate" -n 4 --temp 0 >"$WORK/$m.out" \
    2>"$WORK/$m.err" || true
  check "the template of $m (chat_template.jinja / list form) is found: chatml" \
    test "$(field template 1 "$WORK/$m.out")" = chatml
done

rc=0
printf '/bogus\nHello\n' | chat >/dev/null 2>"$WORK/bogus.err" || rc=$?
check "an unknown command is reported, the chat goes on, the exit status is 1" \
  test "$rc" -eq 1 -a "$(grep -ac '^\[slate\] reply 1: ' "$WORK/bogus.err")" -eq 1
check "... naming the command" grep -aq "unknown command '/bogus'" "$WORK/bogus.err"

# A line with a NUL byte is refused whole (it used to be sent cut at the NUL); the next line is
# read and answered, and the exit status is 1.
rc=0
printf 'Hel\0lo\n/stats\nHello\n/stats\n' | chat >"$WORK/nul" 2>"$WORK/nul.err" || rc=$?
check "a message with a NUL byte is refused, the chat goes on, the exit status is 1 ($rc)" \
  test "$rc" -eq 1 -a "$(grep -ac '^\[slate\] reply [0-9]*: ' "$WORK/nul.err")" -eq 1
check "... saying why" grep -aq "the message contains a NUL byte (at byte 3 of the line); not sent" \
  "$WORK/nul.err"
check "... and nothing of it reaches the conversation (1 message, then 3)" \
  test "$(field messages 1 "$WORK/nul")" = 1 -a "$(field messages 2 "$WORK/nul")" = 3

# A small context with the roll policy drops old turns instead of failing.
printf 'one two three four\nfive six seven eight\nnine ten eleven twelve\n/stats\n' | \
  chat --context 64 --reserve 8 --ctx-policy roll >"$WORK/roll" 2>"$WORK/roll.err" || rc=$?
check "roll: every message gets a reply in a 64-position context" \
  test "$(grep -ac '^\[slate\] reply [0-9]*: ' "$WORK/roll.err")" -eq 3
check "roll: old turns were dropped and reported" \
  test "$(field turns_dropped 1 "$WORK/roll")" -gt 0
check "roll: the drop is reported on stderr" grep -aq 'dropped the' "$WORK/roll.err"
rc=0
printf 'one two three four\nfive six seven eight\nnine ten eleven twelve\n' | \
  chat --context 64 --reserve 8 >/dev/null 2>"$WORK/refuse.err" || rc=$?
check "refuse: a turn that does not fit fails with the numbers (exit 1)" \
  test "$rc" -eq 1
check "... SLATE_E_CONTEXT_FULL naming the context" \
  grep -aq "SLATE_E_CONTEXT_FULL.*the context has 64" "$WORK/refuse.err"
finish
