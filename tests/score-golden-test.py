#!/usr/bin/env python3
"""The goldens through the real `lmpipe score` command line: for each golden
file, score the prompt and the continuation in one run and apply the
comparison rule of goldens/README.md to the rows printed:
  1. every listed [id, logprob] of steps[i] within eps of ours;
  2. where steps[i][0] beats steps[i][1] by >= tau, our top id is its id.
The tolerances are the README's: F32 0.001 / 0.01, the Gemma F32 files
0.01 / 0.02 (llama.cpp's fp16 GELU table).  A reference id missing from our
top 40 fails rule 1.

usage: score-golden-test.py LMPIPE SHARED_DIR GOLDEN_NAME..."""
import json
import os
import subprocess
import sys


def tolerances(model):
    if model.startswith("synth-gemma") and "F32" in model:
        return 0.01, 0.02
    if "F32" in model:
        return 0.001, 0.01
    if model.startswith("synth-gptoss-MXFP4"):  # llama.cpp rounds the expert inputs to Q8_0
        return 0.3, 0.15
    raise SystemExit("no tolerance for %s in this test" % model)


def check(lmpipe, shared, name):
    golden = json.load(open(os.path.join(shared, "goldens", name + ".json")))
    model = golden["model"]
    eps, tau = tolerances(model)
    fails = worst = 0
    for ci, case in enumerate(golden["cases"]):
        prompt, cont, steps = case["prompt_ids"], case["continuation_ids"], case["steps"]
        ids = prompt + cont[: len(steps) - 1]
        r = subprocess.run([lmpipe, "score", "--model", os.path.join(shared, "models", model),
                            "--ids", ",".join(map(str, ids)), "--top", "40", "--threads", "2"],
                           capture_output=True, text=True, timeout=300)
        if r.returncode:
            print("FAIL %s case %d: lmpipe score: %s" % (name, ci, r.stderr.strip()))
            return 1
        rows = {}
        for line in r.stdout.splitlines():
            o = json.loads(line)
            rows[o["pos"]] = o["top"]
        for i, st in enumerate(steps):
            ours = dict((tid, lp) for tid, lp in rows[len(prompt) - 1 + i])
            top_id = rows[len(prompt) - 1 + i][0][0]
            for tid, ref in st:
                d = abs(ours[tid] - ref) if tid in ours else float("inf")
                worst = max(worst, d)
                if not d <= eps:
                    fails += 1
                    if fails <= 10:
                        print("FAIL %s case %d step %d: logprob of %d is %s, reference %.6f"
                              % (name, ci, i, tid, ours.get(tid, "not in our top 40"), ref))
            if st[0][1] - st[1][1] >= tau and top_id != st[0][0]:
                fails += 1
                print("FAIL %s case %d step %d: top %d, reference %d" % (name, ci, i, top_id, st[0][0]))
    print("%s: %s, max |dlogprob| %.6f (eps %g, tau %g)" % (name, "FAIL" if fails else "ok", worst, eps, tau))
    return 1 if fails else 0


def main():
    lmpipe, shared, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    return 1 if sum(check(lmpipe, shared, n) for n in names) else 0


if __name__ == "__main__":
    sys.exit(main())
