# Session 40's second batch (written 2026-12-07 in session 40): on an H200 with less than ten minutes of device time
# left, the eight operators of issue 15 whose median attainment sits near 0.6 on h200.md, or whose seed changed
# since session 26's H200 runs, beside their baselines in one measure_baselines run (about 3 minutes). Its records
# merge over session 26's (a later source wins a shape): python -m agent.studies.merge_baseline_runs
# benchmarks/results/h200_records/s26_run{1,2,3}_records.json <these records> --out benchmarks/results/h200.md.
# Carry .whl (Liger). H200 only: on another card it stops at once (exit 3), before any device time is spent on it.
#   rm -rf /tmp/repo /tmp/res && cp -a . /tmp/repo && cd /tmp/repo && \
#     (setsid nohup bash agent/studies/batch/session40b.sh > /tmp/bg.log 2>&1 < /dev/null &); \
#     sleep 2; bash agent/studies/batch/collect.sh 400
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200" > /tmp/res.not_h200; exit 3; }
batch_begin
mkdir -p /tmp/site && pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
PYTHONPATH=/tmp/site:$PWD step suite_near 330 python3 agent/studies/measure_baselines.py \
  --ops per_token_group_quant_fp8,per_token_quant_fp8,softmax,layer_norm,moe_topk_softmax,rms_norm_quant_fp8,causal_conv1d_update,rotary_embedding \
  --no-variants --rounds 5 --rounds-max-us 10 --max-minutes 4.5 --out /tmp/res/suite_near/out/suite_near.md
touch /tmp/res/all.done
