#!/usr/bin/env bash
# The pretrained bench on a GPU: tiny default vs each pretrained base at equal wall-clock,
# bfloat16 autocast, batched acting; ~6 minutes in all (two models x ~150 s of warm start + A-RIDE,
# plus loading, latency and update timings). Needs torch (CUDA), transformers, peft, numpy, pyarrow,
# matplotlib; no DuckDB, Prefect, MLflow or gguf.
#
#   bench/gpu_pretrained.sh MODEL_DIR [MODEL_DIR ...]   # folders `distrl pretrained` prepared:
#       .distrl/models/smollm2-135m-instruct (LoRA), .distrl/models/all-minilm-l6-v2 (encoder),
#       or any vision-language folder (config.json with a vision_config: SmolVLM, Gemma 3...), which
#       reads SimDroid's screenshots and writes the action, LoRA on its text decoder
#
# DEVICE=cpu runs it without a GPU (float32, no CUDA check) and SMOKE=1 shrinks every count to a
# check that the pipeline runs (seconds of budget, 2 evaluation tasks): with a tiny random folder,
#   python -m bench.tiny_vlm --family idefics3 --out /tmp/tiny-idefics3
#   DEVICE=cpu SMOKE=1 bench/gpu_pretrained.sh /tmp/tiny-idefics3
#
# Writes pretrained_gpu.json/.png for the first folder and pretrained_gpu_<folder name>.json/.png for
# each further one to $OUT when set, else to bench/results/.
set -euo pipefail
: "${1:?usage: bench/gpu_pretrained.sh MODEL_DIR [MODEL_DIR ...] (folders written by distrl pretrained)}"
out_dir=${OUT:-$(dirname "$0")/results}
mkdir -p "$out_dir"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python=${PYTHON:-python3}
device=${DEVICE:-cuda}
if [ "$device" = cuda ]; then
  "$python" -c 'import torch; assert torch.cuda.is_available(), "no CUDA device"; print(torch.cuda.get_device_name(0))'
  precision=(--bf16)
else
  precision=()
fi
if [ "${SMOKE:-0}" = 1 ]; then
  counts=(--budget-seconds "${BUDGET_SECONDS:-60}" --episodes-per-round 4 --updates-per-round 1 --batch-size 4
    --eval-tasks 2 --final-eval-tasks 2 --act-repeats 1 --update-repeats 1)
else
  counts=(--budget-seconds "${BUDGET_SECONDS:-140}" --episodes-per-round 32 --updates-per-round 16 --batch-size 16
    --eval-tasks 32 --final-eval-tasks 96 --act-repeats 10 --update-repeats 5)
fi
name=pretrained_gpu
for model_dir in "$@"; do
  PYTHONPATH="$(cd "$(dirname "$0")/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}" "$python" -m bench.pretrained \
    --base "$model_dir" --device "$device" ${precision[@]+"${precision[@]}"} --warm-start-share 0.25 \
    "${counts[@]}" --out "$out_dir/$name.json" 2>&1 | tee "$out_dir/$name.log"
  name=pretrained_gpu_$(basename "$model_dir")
done
