#!/usr/bin/python3
"""results.py - turns the JSON written by `slate bench` / `slate eval` into sections of
bench/RESULTS.md. Each section lies between <!-- BEGIN name --> and <!-- END name --> markers and
is replaced in place, so the TinyLlama and the eval scripts can update their own parts.

usage:
  results.py tinyllama --dir DIR --out RESULTS.md --commands FILE [--skipped FILE]
  results.py eval --dir DIR --out RESULTS.md --commands FILE --text FILE [--skipped FILE]
DIR holds bench-<format>.json, modes-<format>.json (tinyllama) or eval-<format>.json (eval).
Standard library only (Debian's /usr/bin/python3).
"""
import datetime
import glob
import json
import os
import platform
import re
import subprocess
import sys


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                              check=False).stdout.strip()
    except OSError:
        return ""


def machine():
    model = sh("lscpu | sed -n 's/^Model name: *//p'") or platform.processor()
    cores = os.cpu_count()
    flags = sh("grep -m1 '^flags' /proc/cpuinfo").split()
    isa = [f for f in ("avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni",
                       "avx512_bf16", "avx512_fp16", "amx_tile") if f in flags]
    mem = sh("awk '/MemTotal/ {printf \"%.1f GiB\", $2 / 1048576}' /proc/meminfo")
    llc = sh("lscpu | sed -n 's/^L3 cache: *//p'")
    return "%s, %s cores, %s, L3 %s; ISA: %s; kernel %s" % (
        model, cores, mem, llc, " ".join(isa), platform.release())


def provenance(root, paths):
    """(date of the newest measurement file, commit of the checkout now)."""
    commit = sh("git -C '%s' rev-parse --short HEAD" % root)
    dirty = sh("git -C '%s' status --porcelain --untracked-files=no" % root)
    t = max((os.path.getmtime(p) for p in paths), default=None)
    when = datetime.datetime.fromtimestamp(t) if t else datetime.datetime.now()
    date = when.astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return date, commit + (" + uncommitted changes" if dirty else "")


def fmt(x, digits=1):
    return "-" if x is None else ("%.*f" % (digits, x))


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def replace_section(path, name, body):
    begin, end = "<!-- BEGIN %s -->" % name, "<!-- END %s -->" % name
    text = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    block = "%s\n%s\n%s" % (begin, body.rstrip() + "\n", end)
    if begin in text and end in text:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: block, text,
                      flags=re.S)
    else:
        text = text.rstrip() + ("\n\n" if text.strip() else "") + block + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def read_lines(path):
    if not path or not os.path.exists(path):
        return []
    return [l.rstrip("\n") for l in open(path, encoding="utf-8") if l.strip()]


def fmt_name(path, prefix):
    return os.path.basename(path)[len(prefix):-len(".json")]


def match_text(m):
    """'yes', or which mode parted from the state mode's tokens where (and by how much)."""
    notes = []
    for x in m["modes"]:
        if "first_difference" not in x:
            continue
        k = x["first_difference"] - m["prompt_tokens"]
        what = "near-tie" if x.get("near_tie") else "NO"
        notes.append("%s: %s parts at generated token %d (the two tokens' logits %.2g apart)" % (
            what, x["mode"], k, x.get("tie_gap", float("nan"))))
    return "; ".join(notes) if notes else "yes"


def tinyllama(a, root):
    date, commit = provenance(root, glob.glob(os.path.join(a.dir, "*.json")))
    out = ["## TinyLlama-1.1B shape (synthetic weights)", "",
           "Measured %s at commit %s." % (date, commit),
           "Machine: %s." % machine(), "",
           "The model is `slate synth --shape tinyllama-1.1b` (random weights, the published "
           "shape: hidden 2048, 22 layers, 32 heads / 4 KV heads, FFN 5632, vocab 32000; the "
           "packages declare a context of 4096 instead of the shape's 2048 so that decode at "
           "depth 2048 fits); speed does not depend on the values. Token ids are synthetic (seeded). "
           "Prefill is one predict call per length; decode is greedy, one token per call, at "
           "the given depth (tokens already in the cache). Weight GB/s = bytes one decode step "
           "reads (profiler count: every matrix once + one embedding row) x tokens/s; the "
           "roofline fraction divides it by the machine's read bandwidth measured by `slate "
           "bench` itself (2 threads streaming a 1 GiB buffer, best of 5).", ""]
    rows, bws, loads, skips, keeps = [], [], [], set(), []
    for path in sorted(glob.glob(os.path.join(a.dir, "bench-*.json"))):
        b = load(path)
        name = fmt_name(path, "bench-")
        bws.append("%.1f (%s)" % (b["machine_read_gb_s"], name))
        loads.append("%.2f (%s)" % (b.get("load_average_before", -1), name))
        skips.update("prefill %d: %s" % (p["tokens"], p["skipped"]) for p in b["prefill"]
                     if "skipped" in p)
        skips.update("decode at depth %d: %s" % (d["depth"], d["skipped"]) for d in b["decode"]
                     if "skipped" in d)
        pre = {p["tokens"]: p for p in b["prefill"]}
        dec = {d["depth"]: d for d in b["decode"]}
        def tps(d, digits=1):
            return "skipped" if d is None or "skipped" in d else fmt(d["tok_s"], digits)
        d0 = dec.get(0, {})
        d2 = dec.get(2048, {})
        if "share_of_depth0_alongside" in d2:  # steps alternated with a depth-0 state
            keeps.append("%s %.0f %%" % (name, 100 * d2["share_of_depth0_alongside"]))
        elif "tok_s" in d0 and "tok_s" in d2:  # results of a bench without the pairing
            keeps.append("%s %.0f %% (rows)" % (name, 100 * d2["tok_s"] / d0["tok_s"]))
        rows.append("| %s | %.3f | %s | %s | %s | %s | %s | %s | %s | %.0f | %.2f | %.1f / %.1f |" % (
            name, b["package_bytes"] / 1e9, tps(pre.get(128)), tps(pre.get(512)),
            tps(dec.get(0), 2), tps(dec.get(512), 2), tps(dec.get(2048), 2),
            fmt(d0.get("weight_gb_s")), fmt(100 * d0["roofline_fraction"], 0) + " %"
            if "roofline_fraction" in d0 else "-", b["ttft_ms"], b["peak_rss_bytes"] / 1e9,
            b["load_ms"]["first"], b["load_ms"]["second"]))
        kern = b["kernels"]
    if rows:
        out += ["| format | package GB | prefill 128 tok/s | prefill 512 tok/s | decode d=0 "
                "tok/s | decode d=512 | decode d=2048 | weights GB/s (d=0) | of machine BW | "
                "TTFT ms (32-token prompt) | peak RSS GB | load ms first / second |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        out += rows
        out += ["", "Machine read bandwidth measured by slate in the same runs: %s GB/s. Kernel "
                "set: %s. Load average (1 min) before each run: %s; the VM has 2 cores, so a "
                "load above ~1 means other work (builds, tests) shared them and every number "
                "above is lower than on a quiet machine." % (", ".join(bws), kern,
                                                             ", ".join(loads)), ""]
        out += ["Decode at depth 2048 as a share of decode at depth 0, measured with each "
                "depth-2048 step alternated with a step of a second state decoding from depth 0 "
                "(timed apart, so both see the same memory-bandwidth window): %s." %
                ", ".join(keeps), ""] if keeps else []
        out += ["Skipped: %s." % "; ".join(sorted(skips))] if skips else []
        out.append("")
    skipped = read_lines(a.skipped)
    if skipped:
        out += ["Not measured, or failed:", ""] + ["- " + s for s in skipped] + [""]
    for path in sorted(glob.glob(os.path.join(a.dir, "bench-*.json"))):
        prof = load(path).get("profile", {}).get("decode")
        if not prof:
            continue
        out += ["Decode profile, %s (`slate bench --profile`: %d decode calls at depth 512; "
                "groups over 1 %% of the time):" % (fmt_name(path, "bench-"), prof["calls"]), "",
                "| share | ms/token | GB/s | GFLOP/s | kernel | op | dtype | tensor (ops) |",
                "| ---: | ---: | ---: | ---: | --- | --- | --- | --- |"]
        calls = max(prof["calls"], 1)
        for g in prof["groups"]:
            if g["share"] < 0.01:
                continue
            out.append("| %.1f %% | %.3f | %s | %s | %s%s | %s | %s | %s (%d) |" % (
                100 * g["share"], g["ns"] / 1e6 / calls,
                fmt(g["bytes"] / g["ns"]) if g["ns"] and g["bytes"] else "-",
                fmt(g["flops"] / g["ns"]) if g["ns"] and g["flops"] else "-", g["kernel"],
                " (scalar fallback)" if g["scalar_fallback"] else "", g["op"], g["dtype"] or "-",
                "`%s`" % g["tensor"] if g["tensor"] else "-", g["n_ops"]))
        out.append("")
    modes = sorted(glob.glob(os.path.join(a.dir, "modes-*.json")))
    if modes:
        out += ["### Recompute vs KV-cache I/O vs in-place state", "",
                "The design rests on this comparison (published for Llama 3.1 8B on an M1 Max: "
                "0.19 -> 1.25 -> 16.26 tok/s, then 33.67 with int4 weights). Same package, greedy "
                "decoding; the gate: kv-io runs the state mode's kernels and must give exactly "
                "its tokens, else `slate bench` exits 1. recompute runs the prefill kernels: "
                "with activations quantized to int8 on the fly (int8/int4 on VNNI), a last-bit "
                "difference upstream can flip an int8 rounding, so its tokens may part from "
                "state's within the quantization error (the last column says where). recompute: "
                "no cache, every step re-feeds the whole sequence (prefill kernels); kv-io: the "
                "cache is an explicit input and output as in a stateless model with a "
                "fixed-shape cache: before each step every cache tensor is imported whole (all "
                "%s positions of the state) from a caller buffer, after it the live rows are "
                "exported back; state: the cache is updated in place. Tokens/s counts the "
                "decoded tokens after an untimed prompt prefill." % (
                    "/".join(sorted({str(load(p).get("state_n_ctx", "?")) for p in modes}))),
                "",
                "| format | prompt | decoded | recompute tok/s | kv-io tok/s | state tok/s | "
                "state / recompute | tokens equal |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for path in modes:
            m = load(path)
            by = {x["mode"]: x for x in m["modes"]}
            rc, kv, st = by.get("recompute"), by.get("kv-io"), by.get("state")
            out.append("| %s | %d | %d | %s | %s | %s | %s | %s |" % (
                fmt_name(path, "modes-"), m["prompt_tokens"], m["decode_tokens"],
                fmt(rc and rc["tok_s"], 2), fmt(kv and kv["tok_s"], 2), fmt(st and st["tok_s"], 2),
                ("%.1fx" % (st["tok_s"] / rc["tok_s"])) if rc and st else "-", match_text(m)))
        out.append("")
    out += ["Commands (bench/run_tinyllama.sh):", "", "```sh"] + read_lines(a.commands) + ["```"]
    replace_section(a.out, "tinyllama", "\n".join(out))


def evaluation(a, root):
    date, commit = provenance(root, glob.glob(os.path.join(a.dir, "*.json")))
    out = ["## Quality of the formats on stories260K", "",
           "Measured %s at commit %s." % (date, commit), "",
           "`slate eval` of each package against the fp32 package of the same checkpoint "
           "(`../shared/models/stories260K/stories260K.bin` + `tok512.bin`) over `%s` "
           "(original short stories in simple English, written for this benchmark in the style the "
           "model was trained on), in windows of the "
           "model's 512-token context. KL = mean over positions of KL(p_fp32 || p_format) in "
           "nats; top-1 = how often both pick the same most likely token." % a.text, "",
           "| format | positions | KL mean | KL max | top-1 agreement | perplexity | fp32 "
           "perplexity | KV cache (format / fp32) |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for path in sorted(glob.glob(os.path.join(a.dir, "eval-*.json"))):
        e = load(path)
        out.append("| %s | %d | %.3g | %.3g | %.4f | %.3f | %.3f | %s / %s |" % (
            fmt_name(path, "eval-"), e["positions"], e["kl_mean"], e["kl_max"],
            e["top1_agreement"], e["ppl_model"], e["ppl_ref"], e.get("kv_dtype_model", "?"),
            e.get("kv_dtype_ref", "?")))
    out.append("")
    skipped = read_lines(a.skipped)
    if skipped:
        out += ["Not measured, or failed:", ""] + ["- " + s for s in skipped] + [""]
    out += ["Commands (bench/run_eval.sh):", "", "```sh"] + read_lines(a.commands) + ["```"]
    replace_section(a.out, "eval", "\n".join(out))


def main(argv):
    import argparse
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("what", choices=["tinyllama", "eval"])
    p.add_argument("--dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--commands", required=True)
    p.add_argument("--skipped")
    p.add_argument("--text", default="bench/eval_text.txt")
    a = p.parse_args(argv)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    (tinyllama if a.what == "tinyllama" else evaluation)(a, root)


if __name__ == "__main__":
    main(sys.argv[1:])
