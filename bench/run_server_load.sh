#!/usr/bin/env bash
# Bounded load run of `slate serve` on loopback (bench/server_load.py) at 1, 2 and 8 concurrent
# clients, on a SmolLM2-135M-shaped model with random weights (slate synth), fp16; results go
# to the "server" section of bench/RESULTS.md. Usage: bench/run_server_load.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SLATE=${SLATE:-build/slate}
DIR=${SLATE_BENCH_DIR:-/tmp/slate-bench}
mkdir -p "$DIR"
[ -d "$DIR/smollm2-135m" ] || "$SLATE" synth --shape smollm2-135m -o "$DIR/smollm2-135m" --seed 1
[ -f "$DIR/smollm2-135m-f16.slate" ] ||
  "$SLATE" convert "$DIR/smollm2-135m" -o "$DIR/smollm2-135m-f16.slate" --dtype fp16 --context 2048
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
SLOTS=2
"$SLATE" serve "$DIR/smollm2-135m-f16.slate" --port "$PORT" --slots $SLOTS --queue 32 -t 1 \
  --template chatml 2>"$DIR/serve.log" &
PID=$!
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.2; done
/usr/bin/python3 bench/server_load.py "http://127.0.0.1:$PORT" --levels 1,2,8 --requests 16 \
  --max-tokens 32 --json "$DIR/server.json"
/usr/bin/python3 - "$DIR/server.json" "$SLOTS" <<'PY'
import json, sys, datetime, subprocess, os
rows = json.load(open(sys.argv[1]))
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
load = open("/proc/loadavg").read().split()[0]
body = ["## HTTP server under load (`bench/run_server_load.sh`)", "",
        "Measured %s at commit %s; load average before the run: %s." % (
            datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), commit, load), "",
        "`slate serve` with %s slots (1 thread each) and a queue of 32, on a SmolLM2-135M-shaped "
        "model with random weights (`slate synth --shape smollm2-135m`, fp16, context 2048). "
        "Each client sends streaming chat completions (distinct ~20-token prompts, 32 tokens "
        "each, `ignore_eos`), 16 requests per level, over loopback; `bench/server_load.py` "
        "times them." % sys.argv[2], "",
        "| clients | requests ok | 503 | requests/s | TTFT p50 ms | TTFT p99 ms | decode tok/s per request (p50) | tokens/s total |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
for r in rows:
    body.append("| %d | %d | %d | %.2f | %.0f | %.0f | %s | %.1f |" % (
        r["concurrency"], r["ok"], r["busy_503"], r["requests_per_s"] or 0, r["ttft_p50_ms"],
        r["ttft_p99_ms"], "%.1f" % r["decode_tps_p50"] if r["decode_tps_p50"] else "-",
        r["tokens_per_s_total"] or 0))
body.append("")
body.append("With more clients than slots, requests queue for a slot: TTFT grows with the wait "
            "while total throughput is bounded by the two cores.")
text = "\n".join(body) + "\n"
path = "bench/RESULTS.md"
cur = open(path).read() if os.path.exists(path) else ""
b, e = "<!-- BEGIN server -->", "<!-- END server -->"
sec = b + "\n" + text + e
if b in cur and e in cur:
    cur = cur[:cur.index(b)] + sec + cur[cur.index(e) + len(e):]
else:
    cur = cur.rstrip("\n") + "\n\n" + sec + "\n"
open(path, "w").write(cur)
print("wrote the server section of", path)
PY
