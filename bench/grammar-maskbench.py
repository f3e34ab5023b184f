#!/usr/bin/env python3
"""MaskBench through `lmpipe grammar maskbench`, one process, one thread:
the whole shared half (or the files given), and the table of issue 29 with
the targets next to the figures.

    bench/grammar-maskbench.py LMPIPE SHARED_DIR WORK_DIR [FILE.json...]

The tarball is extracted under WORK_DIR (a build folder), where the lines
of lmpipe grammar maskbench are kept too (maskbench.jsonl).  Mask times are
over every mask of every compiled file (LMPIPE_GRAMMAR_TIMES), compile p50
over compiled files, as MaskBench's README defines them.  Times are wall
clock unless LMPIPE_GRAMMAR_CLOCK=cpu is set; the load average before and
after is printed, since the machine may be shared."""
import json
import os
import resource
import subprocess
import sys
import tarfile
import time


def pct(sorted_v, p):
    return sorted_v[int(len(sorted_v) * p / 100)] if sorted_v else float("nan")


def main():
    lmpipe, shared, work = sys.argv[1:4]
    files = sys.argv[4:]
    if not files:
        folder = os.path.join(work, "maskbench")
        if not os.path.exists(os.path.join(folder, ".extracted")):
            with tarfile.open(os.path.join(shared, "maskbench", "maskbench.tar.xz")) as t:
                t.extractall(work)
            open(os.path.join(folder, ".extracted"), "w").close()
        files = sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".json"))
    times_path = os.path.join(work, "maskbench-times.txt")
    if os.path.exists(times_path):
        os.unlink(times_path)
    env = dict(os.environ, LMPIPE_GRAMMAR_TIMES=times_path)
    vocab = os.path.join(shared, "vocab", "ggml-vocab-llama3.gguf")
    load0 = os.getloadavg()
    t0 = time.time()
    out = subprocess.run([lmpipe, "grammar", "maskbench", "--vocab", vocab] + files,
                         capture_output=True, text=True, env=env)
    wall = time.time() - t0
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    load1 = os.getloadavg()
    if out.returncode:
        print(out.stderr, file=sys.stderr)
        return 1
    with open(os.path.join(work, "maskbench.jsonl"), "w") as f:
        f.write(out.stdout)
    lines = [json.loads(l) for l in out.stdout.splitlines()]
    classes = {"passing": 0, "compile error": 0, "invalidation error": 0, "validation error": 0}
    compile_us = []
    for d in lines:
        if not d["compiled"]:
            classes["compile error"] += 1
            continue
        compile_us.append(d["compile_us"])
        if any(t["accepted"] and not t["valid"] for t in d["texts"]):
            classes["invalidation error"] += 1
        elif any(t["valid"] and not t["accepted"] for t in d["texts"]):
            classes["validation error"] += 1
        else:
            classes["passing"] += 1
    masks = sorted(float(x) for x in open(times_path)) if os.path.exists(times_path) else []
    compile_us.sort()
    n = len(lines)
    mean = sum(masks) / len(masks) if masks else float("nan")
    clock = "CPU" if os.environ.get("LMPIPE_GRAMMAR_CLOCK") == "cpu" else "wall"
    print(f"MaskBench: {n} files, {len(masks)} masks, {wall:.0f} s; {clock} clock; "
          f"load average {load0[0]:.2f} before, {load1[0]:.2f} after; peak memory {peak_mib:.0f} MiB")
    print()
    print("| | lmpipe | target |")
    print("|---|---:|---:|")
    print(f"| schemas passing | {classes['passing']} ({100 * classes['passing'] / max(n, 1):.1f}%) | at least 80% |")
    print(f"| compile errors (refused) | {classes['compile error']} | |")
    print(f"| invalidation errors | {classes['invalidation error']} | 0 |")
    print(f"| validation errors | {classes['validation error']} | at most 10 |")
    print(f"| mask time mean / p99 (us) | {mean:.1f} / {pct(masks, 99):.1f} | at most 50 / 400 |")
    print(f"| mask time p50 / max (us) | {pct(masks, 50):.1f} / {masks[-1] if masks else float('nan'):.0f} | |")
    print(f"| compile time p50 (us) | {pct(compile_us, 50):.0f} | at most 1,000 |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
