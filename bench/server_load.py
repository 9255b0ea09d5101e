#!/usr/bin/python3
"""server_load.py - a bounded load run against a running `slate serve` on loopback: for each
concurrency level, C client threads send streaming chat completions (distinct prompts, fixed
max_tokens, ignore_eos so every request decodes the same number of tokens) until R requests in
total are done, and the run reports requests/s, p50/p99 time to first token, p50 decode tokens/s
per request, and how many requests were told 503. Standard library only.

usage: server_load.py URL --levels 1,2,8 --requests 16 --max-tokens 32 [--key KEY] [--json OUT]
"""
import argparse
import http.client
import json
import threading
import time
import urllib.parse


def one(url, key, prompt, max_tokens):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = json.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
                       "temperature": 0.7, "stream": True, "ignore_eos": True})
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    t0 = time.monotonic()
    conn.request("POST", "/v1/chat/completions", body, headers)
    r = conn.getresponse()
    if r.status != 200:
        r.read()
        conn.close()
        return {"status": r.status}
    ttft, n, t_last = None, 0, None
    while True:
        line = r.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        data = line[6:]
        if data == b"[DONE]":
            break
        ev = json.loads(data)
        if ev.get("choices") and ev["choices"][0].get("delta", {}).get("content"):
            now = time.monotonic()
            if ttft is None:
                ttft = now - t0
            t_last = now
        if ev.get("usage"):
            n = ev["usage"]["completion_tokens"]
    conn.close()
    total = time.monotonic() - t0
    tps = (n - 1) / (t_last - t0 - ttft) if ttft is not None and n > 1 and t_last > t0 + ttft else None
    return {"status": 200, "ttft": ttft, "tokens": n, "total": total, "tps": tps}


def pct(xs, p):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def level(url, key, c, total, max_tokens):
    results, lock, next_i = [], threading.Lock(), [0]

    def worker():
        while True:
            with lock:
                i = next_i[0]
                if i >= total:
                    return
                next_i[0] += 1
            prompt = "Request %d: tell me a short story about the number %d." % (i, i * 7919)
            res = one(url, key, prompt, max_tokens)
            with lock:
                results.append(res)

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    ok = [r for r in results if r["status"] == 200]
    return {
        "concurrency": c, "requests": len(results), "ok": len(ok),
        "busy_503": sum(1 for r in results if r["status"] == 503), "wall_s": wall,
        "requests_per_s": len(ok) / wall if wall > 0 else None,
        "ttft_p50_ms": (pct([r["ttft"] for r in ok], 50) or 0) * 1000,
        "ttft_p99_ms": (pct([r["ttft"] for r in ok], 99) or 0) * 1000,
        "decode_tps_p50": pct([r["tps"] for r in ok], 50),
        "tokens_per_s_total": sum(r["tokens"] for r in ok) / wall if wall > 0 else None,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--levels", default="1,2,8")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--key")
    ap.add_argument("--json")
    a = ap.parse_args()
    out = [level(a.url, a.key, int(c), a.requests, a.max_tokens) for c in a.levels.split(",")]
    for r in out:
        print("c=%(concurrency)d ok=%(ok)d 503=%(busy_503)d req/s=%(requests_per_s).2f "
              "ttft p50=%(ttft_p50_ms).0f ms p99=%(ttft_p99_ms).0f ms" % r)
    if a.json:
        json.dump(out, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
