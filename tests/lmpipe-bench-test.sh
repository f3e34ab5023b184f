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
