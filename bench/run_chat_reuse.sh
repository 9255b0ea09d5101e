#!/usr/bin/env bash
# Second-turn time to first token with cross-turn cache reuse vs a cold prefill, on a model of
# realistic shape (SmolLM2-135M, random weights, `slate synth`), with a history of 1000+ tokens
# (the system message is bench/eval_text.txt). `slate chat` runs two turns in one process:
# turn 1 prefills the whole history cold; turn 2 reuses it and prefills only the new turn.
# The cold TTFT is turn 1's (a history shorter than turn 2's, so the ratio is understated).
# Writes the "reuse" section of bench/RESULTS.md. Usage: bench/run_chat_reuse.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SLATE=${SLATE:-build/slate}
DIR=${SLATE_BENCH_DIR:-/tmp/slate-bench}
mkdir -p "$DIR"
[ -d "$DIR/smollm2-135m" ] || "$SLATE" synth --shape smollm2-135m -o "$DIR/smollm2-135m" --seed 1
PKG=$DIR/smollm2-135m-f16-ctx4096.slate
[ -f "$PKG" ] || "$SLATE" convert "$DIR/smollm2-135m" -o "$PKG" --dtype fp16 --context 4096
SYSTEM=$(tr '\n' ' ' < bench/eval_text.txt)
printf 'What happens next in the story?\nAnd after that?\n/stats\n' |
  "$SLATE" chat "$PKG" --template chatml --system "$SYSTEM" -n 16 --temp 0 -t 2 \
    >"$DIR/reuse.out" 2>"$DIR/reuse.err"
cat "$DIR/reuse.err"
/usr/bin/python3 - "$DIR/reuse.err" "$DIR/reuse.out" <<'PY'
import datetime, os, re, subprocess, sys
err = open(sys.argv[1]).read()
rows = re.findall(r"reply (\d+): (\d+) tokens .*prompt (\d+) new \+ (\d+) reused, ttft ([0-9.]+) ms", err)
if len(rows) < 2:
    sys.exit("could not read two replies from slate chat's stderr")
(t1, _, new1, reused1, ttft1), (t2, _, new2, reused2, ttft2) = rows[:2]
ttft1, ttft2 = float(ttft1), float(ttft2)
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
load = open("/proc/loadavg").read().split()[0]
text = "\n".join([
    "## Cross-turn reuse: second-turn time to first token (`bench/run_chat_reuse.sh`)", "",
    "Measured %s at commit %s; load average before the run: %s." % (
        datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), commit, load), "",
    "SmolLM2-135M shape, random weights, fp16, context 4096, 2 threads, ChatML; the system "
    "message is bench/eval_text.txt. `slate chat` runs two turns in one process.", "",
    "| turn | prompt tokens computed | tokens reused from the cache | TTFT ms |",
    "| ---: | ---: | ---: | ---: |",
    "| 1 (cold: the whole history) | %s | %s | %.1f |" % (new1, reused1, ttft1),
    "| 2 (reuse: only the new turn) | %s | %s | %.1f |" % (new2, reused2, ttft2), "",
    "Second-turn TTFT with reuse is **%.1fx** faster than the cold prefill of turn 1, whose "
    "history (%s tokens) is shorter than turn 2's (%d tokens): a cold turn 2 would be slower "
    "still." % (ttft1 / ttft2, new1, int(new2) + int(reused2)), ""])
path = "bench/RESULTS.md"
cur = open(path).read() if os.path.exists(path) else ""
b, e = "<!-- BEGIN reuse -->", "<!-- END reuse -->"
sec = b + "\n" + text + e
cur = cur[:cur.index(b)] + sec + cur[cur.index(e) + len(e):] if (b in cur and e in cur) else cur.rstrip("\n") + "\n\n" + sec + "\n"
open(path, "w").write(cur)
print("second-turn TTFT speed-up with reuse: %.1fx" % (ttft1 / ttft2))
PY
