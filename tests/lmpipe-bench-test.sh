#!/bin/bash
# lmpipe bench, in-process: one JSON object with the throughputs and the
# decode's bandwidth ceiling, whose byte count is checked against the tensor
# table that `lmpipe info` prints (every tensor but token_embd, which decode
# reads one row of, unless there is no output.weight and it is the output).
# Usage: lmpipe-bench-test.sh LMPIPE SHARED_DIR
set -eu
lmpipe=$1 models=$2/models
fail=0
decode_bytes() { # GGUF: the bytes of the tensors one decode step reads
    "$lmpipe" info "$1" | awk '
        $1 ~ /\.weight$|\.bias$/ && NF >= 4 { n[$1] = $NF; total += $NF }
        END { if (!("output.weight" in n)) tied = 1
              print total - (tied ? 0 : n["token_embd.weight"]) }'
}
for m in stories260K synth-llama-Q4_K_M synth-qwen2-Q8_0; do
    f=$models/$m.gguf
    out=$("$lmpipe" bench --model "$f" --prompt-tokens 8 --gen-tokens 8 --threads 2)
    want=$(decode_bytes "$f")
    if ! python3 - "$out" "$want" "$m" <<'PY'
import json, sys
d, want, m = json.loads(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
r = d["decode_read"]
errs = []
for k in ("prefill_tok_s", "decode_tok_s"):
    if not d[k] > 0: errs.append(f"{k} = {d[k]}")
for k in ("decode_gb_s", "read_gb_s", "read_gb_s_before", "read_gb_s_after", "ceiling_tok_s",
          "file_ceiling_tok_s", "decode_of_ceiling_pct"):
    if not r[k] > 0: errs.append(f"decode_read.{k} = {r[k]}")
# the report rounds to MB
if abs(r["gb_per_token"] * 1e9 - want) > 0.5e6:
    errs.append(f"gb_per_token {r['gb_per_token']} but the tensors decode reads hold {want:.0f} bytes")
if abs(r["decode_gb_s"] - d["decode_tok_s"] * want / 1e9) > 0.05 + 0.01 * r["decode_gb_s"]:
    errs.append("decode_gb_s is not decode_tok_s times the bytes per token")
print(f"{m}: {'; '.join(errs) or 'ok'}")
sys.exit(1 if errs else 0)
PY
    then fail=1; echo "$out"; fi
done
# --seqs: sequences decoding side by side; decode_tok_s counts every
# sequence's tokens, decode_gb_s is per step (one read of the weights)
m=synth-qwen2-Q8_0
out=$("$lmpipe" bench --model "$models/$m.gguf" --prompt-tokens 8 --gen-tokens 8 --threads 2 --seqs 5)
want=$(decode_bytes "$models/$m.gguf")
if ! python3 - "$out" "$want" <<'PY'
import json, sys
d, want = json.loads(sys.argv[1]), float(sys.argv[2])
r = d["decode_read"]
errs = []
if d["seqs"] != 5 or not d["decode_tok_s"] > 0: errs.append("seqs or decode_tok_s")
if abs(r["decode_gb_s"] - d["decode_tok_s"] / 5 * want / 1e9) > 0.05 + 0.01 * r["decode_gb_s"]:
    errs.append("decode_gb_s is not steps/s times the bytes per step")
print("seqs:", "; ".join(errs) or "ok")
sys.exit(1 if errs else 0)
PY
then fail=1; echo "$out"; fi
# A mixture of experts: a step runs each chosen expert once for all the
# tokens that chose it (8 sequences make 16 choices of 8 experts), and the
# ceiling counts the chosen experts' bytes only.
m=synth-qwen3moe-F32
for seqs in 1 8; do
    out=$("$lmpipe" bench --model "$models/$m.gguf" --prompt-tokens 8 --gen-tokens 8 --threads 2 --seqs $seqs)
    want=$(decode_bytes "$models/$m.gguf")
    exps=$("$lmpipe" info "$models/$m.gguf" | awk '$1 ~ /_exps\.weight$/ { t += $NF } END { print t }')
    if ! python3 - "$out" "$want" "$exps" "$seqs" <<'PY'
import json, sys
d, want, exps, seqs = json.loads(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
m, r = d["moe"], d["decode_read"]
errs = []
if m["experts"] != 8 or m["used_per_token"] != 2 or m["tokens_per_layer_step"] != seqs:
    errs.append("experts, used_per_token or tokens_per_layer_step")
if m["choices_per_layer_step"] != 2 * seqs: errs.append("choices_per_layer_step")
if seqs == 1 and m["expert_reads_per_layer_step"] != 2: errs.append("one token reads other than its 2 experts")
if not 2 <= m["expert_reads_per_layer_step"] <= 8: errs.append("expert reads out of 2..8")
# 4 layers of 3 matrices of 8 experts: one expert's share of the expert bytes
per_read = exps / (4 * 8)
if abs(m["expert_mb_per_step"] * 1048576 - 4 * m["expert_reads_per_layer_step"] * per_read) > 0.02 * 1048576:
    errs.append("expert_mb_per_step is not the reads times an expert's bytes")
step = want - exps + m["expert_fraction_read"] * exps
if abs(r["gb_per_token"] * 1e9 - step) > 0.5e6:
    errs.append(f"gb_per_token {r['gb_per_token']}: the step reads {step:.0f} bytes")
print(f"moe --seqs {seqs}:", "; ".join(errs) or "ok", m)
sys.exit(1 if errs else 0)
PY
    then fail=1; echo "$out"; fi
done
for bad in "--seqs 0" "--seqs 257" "--seqs x" "--seqs 2 --pipeline"; do
    if err=$("$lmpipe" bench --model "$models/$m.gguf" $bad 2>&1); then
        echo "FAIL: bench $bad accepted"; fail=1
    elif ! echo "$err" | grep -q -- "--seqs"; then
        echo "FAIL: bench $bad: the error does not name --seqs: $err"; fail=1
    fi
done

# --pipeline: the four services, rounds of both ways, and the step report
out=$("$lmpipe" bench --pipeline --model "$models/stories260K.gguf" --prompt-tokens 8 \
      --gen-tokens 8 --tokens 8 --runs 2 --threads 1)
if ! python3 - "$out" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
errs = []
if d["mode"] != "pipeline" or d["rounds"] != 2 or d["logits"] != "shm":
    errs.append("mode, rounds or logits")
for k in ("prefill_tok_s", "decode_tok_s"):
    if not d[k] > 0 or not d["in_process"][k] > 0: errs.append(k)
if not d["in_process"]["decode_sampled_tok_s"] > 0: errs.append("decode_sampled_tok_s")
for k in ("prefill", "decode", "decode_vs_sampled"):
    if not -1000 < d["pipeline_cost_pct"][k] < 100: errs.append("pipeline_cost_pct." + k)
s = d["step_us"]
if s["steps"] != 16 or not s["in_process_p50"] > 0 or not s["pipeline_p50"] > 0:
    errs.append("step_us")
print("pipeline:", "; ".join(errs) or "ok")
sys.exit(1 if errs else 0)
PY
then fail=1; echo "$out"; fi
exit $fail
