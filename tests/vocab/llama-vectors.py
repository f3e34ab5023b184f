#!/usr/bin/python3
"""llama.cpp's ids for each case of an .inp file (texts separated by
"\\n__ggml_vocab_test__\\n"), one line of " id id ..." per case, as
../shared/vocab/*.out hold them: the prebuilt llama-tokenize with --no-bos
--no-parse-special --no-escape.  Used by make-*-vectors.sh.

usage: llama-vectors.py LLAMA_TOKENIZE VOCAB.gguf IN.inp OUT.out"""
import subprocess
import sys

tok, vocab, inp, out = sys.argv[1:5]
lines = []
for text in open(inp, "rb").read().decode().split("\n__ggml_vocab_test__\n")[:-1]:
    r = subprocess.run([tok, "-m", vocab, "--stdin", "--ids", "--no-bos", "--no-parse-special",
                        "--no-escape", "--log-disable"], input=text.encode(), capture_output=True,
                       check=True)
    ids = [x.strip() for x in r.stdout.decode().strip().strip("[]").split(",") if x.strip()]
    lines.append("".join(" " + i for i in ids))
open(out, "w").write("\n".join(lines) + "\n")
