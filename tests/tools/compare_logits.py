#!/usr/bin/python3
"""Compare two logits files row by row.

Test tooling for slate. Run with /usr/bin/python3 (needs numpy only).

    compare_logits.py A B --vocab V [--rows-a all|last|N|A:B] [--rows-b all|last|N|A:B]
                      [--atol X] [--rtol Y] [--argmax] [--quiet]

A and B are raw little-endian float32 [rows][V] (hfmodel.py forward, slate's logits dumps), or
text files ending in .txt with one value per line (llama2.c reference logits). --rows-x picks
the rows of a file to compare: all (default), last, or a 0-based row index. After selection both
sides must have the same number of rows.

Prints, per row: max |a - b|, max |a - b| / max(|b|, 1e-6) (B is the reference), argmax of each
and whether they agree. Exit status: 0 when every element has |a - b| <= atol + rtol * |b|
(and, with --argmax, every row's argmax agrees); 1 when not; 2 on bad input.
Defaults: atol 1e-4, rtol 0.
"""

import argparse
import sys

import numpy as np


def load(path, vocab):
    if path.endswith(".txt"):
        a = np.loadtxt(path, dtype=np.float64, ndmin=1)
    else:
        a = np.fromfile(path, dtype="<f4").astype(np.float64)
    if a.size == 0 or a.size % vocab:
        raise ValueError("%s: %d values is not a multiple of vocab %d" % (path, a.size, vocab))
    return a.reshape(-1, vocab)


def select(a, rows, path):
    if rows == "all":
        return a
    if rows == "last":
        return a[-1:]
    if ":" in rows:  # half-open range START:END of 0-based rows
        lo, hi = (int(x) for x in rows.split(":", 1))
        if not 0 <= lo < hi <= a.shape[0]:
            raise ValueError("%s: rows %s out of range (%d rows)" % (path, rows, a.shape[0]))
        return a[lo:hi]
    i = int(rows)
    if not -a.shape[0] <= i < a.shape[0]:
        raise ValueError("%s: row %d out of range (%d rows)" % (path, i, a.shape[0]))
    return a[i:i + 1] if i != -1 else a[-1:]


def compare(a, b, atol=1e-4, rtol=0.0, need_argmax=False, out=sys.stdout):
    """a, b: [rows][vocab]. Prints a table; returns True when within tolerance."""
    ok = True
    worst = 0.0
    for r in range(a.shape[0]):
        d = np.abs(a[r] - b[r])
        bad = ~(d <= atol + rtol * np.abs(b[r]))  # NaN counts as bad
        rel = d / np.maximum(np.abs(b[r]), 1e-6)
        am_a, am_b = int(np.argmax(a[r])), int(np.argmax(b[r]))
        row_ok = not bad.any() and (am_a == am_b or not need_argmax)
        ok &= row_ok
        worst = max(worst, float(np.nanmax(d)) if not np.isnan(d).all() else float("inf"))
        if out is not None:
            print("row %d: max_abs %.3g  max_rel %.3g  argmax %d/%d %s  %s"
                  % (r, float(np.max(d)), float(np.max(rel)), am_a, am_b,
                     "same" if am_a == am_b else "DIFF", "ok" if row_ok else "FAIL"), file=out)
    if out is not None:
        print("%s: %d rows, worst max_abs %.3g (atol %g, rtol %g)"
              % ("PASS" if ok else "FAIL", a.shape[0], worst, atol, rtol), file=out)
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b", help="reference (relative error is taken against it)")
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--rows-a", default="all")
    ap.add_argument("--rows-b", default="all")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=0.0)
    ap.add_argument("--argmax", action="store_true", help="also require equal argmax per row")
    ap.add_argument("--quiet", action="store_true", help="print only the summary line")
    args = ap.parse_args(argv)
    try:
        a = select(load(args.a, args.vocab), args.rows_a, args.a)
        b = select(load(args.b, args.vocab), args.rows_b, args.b)
    except (OSError, ValueError) as e:
        print("compare_logits: %s" % e, file=sys.stderr)
        return 2
    if a.shape != b.shape:
        print("compare_logits: %d rows vs %d rows after selection" % (a.shape[0], b.shape[0]),
              file=sys.stderr)
        return 2
    if args.quiet:
        ok = compare(a, b, args.atol, args.rtol, args.argmax, out=None)
        print("%s: %d rows, max_abs %.3g" % ("PASS" if ok else "FAIL", a.shape[0],
                                             float(np.max(np.abs(a - b)))))
    else:
        ok = compare(a, b, args.atol, args.rtol, args.argmax)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
