#!/usr/bin/env python3
"""Run llama.cpp's tokenizer test vectors through the real `lmpipe tokenize
--raw`: every VOCAB.gguf.inp / VOCAB.gguf.out pair in the vocab folder.
Cases in .inp are separated by "\\n__ggml_vocab_test__\\n"; line i of .out
holds the expected IDs of case i.

usage: vocab_test.py LMPIPE VOCAB_DIR [NAME...]"""
import os
import subprocess
import sys


def main():
    lmpipe, vdir = sys.argv[1], sys.argv[2]
    only = sys.argv[3:]
    pairs = sorted(f[:-4] for f in os.listdir(vdir) if f.endswith(".gguf.inp"))
    if only:
        pairs = [p for p in pairs if any(p == f"ggml-vocab-{o}.gguf" for o in only)]
    if not pairs:
        print(f"no .inp/.out pairs in {vdir}")
        return 1
    failed = 0
    for p in pairs:
        inp = open(os.path.join(vdir, p + ".inp"), "rb").read().decode("utf-8")
        cases = inp.split("\n__ggml_vocab_test__\n")[:-1]
        outs = open(os.path.join(vdir, p + ".out"), encoding="utf-8").read().split("\n")
        ok = 0
        for i, text in enumerate(cases):
            r = subprocess.run([lmpipe, "tokenize", "--model", os.path.join(vdir, p), "--raw"],
                               input=text.encode("utf-8"), capture_output=True, timeout=60)
            got = r.stdout.decode().split()
            want = outs[i].split() if i < len(outs) else None
            if r.returncode == 0 and got == want:
                ok += 1
            else:
                print(f"FAIL {p} case {i}: {text[:60]!r}\n  want {want}\n  got  {got} {r.stderr.decode().strip()}")
        print(f"{p}: {ok}/{len(cases)}")
        failed += len(cases) - ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
