# Session 40's second batch (written 2026-12-07 in session 40), for a call with less than ten minutes of device time:
#   rotary_probe   (any card) agent/studies/rotary_gather_probe.py: rotary_embedding's seed beside its own kernel fed
#                  cos/sin rows gathered before the call, and beside Liger, 9 rounds on the decode shapes: is the
#                  decode gap to Liger the contract's gather (positions[t], then the cache row it names)?
#   suite_near     (an H200 only) the eight operators of issue 15 whose median attainment sits near 0.6 on h200.md,
#                  or whose seed changed since session 26's H200 runs, beside their baselines in one
#                  measure_baselines run (about 3 minutes). Its records merge over session 26's (a later source
#                  wins a shape): python -m agent.studies.merge_baseline_runs
#                  benchmarks/results/h200_records/s26_run{1,2,3}_records.json <these records> --out benchmarks/results/h200.md
# Carry .whl (Liger). One command:
#   rm -rf /tmp/repo /tmp/res && cp -a . /tmp/repo && cd /tmp/repo && \
#     (setsid nohup bash agent/studies/batch/session40b.sh > /tmp/bg.log 2>&1 < /dev/null &); \
#     sleep 2; bash agent/studies/batch/collect.sh 400
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || BATCH_SKIP="$BATCH_SKIP suite_near"
batch_begin
mkdir -p /tmp/site && pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
PYTHONPATH=/tmp/site:$PWD step rotary_probe 90 python3 -m agent.studies.rotary_gather_probe \
  --out /tmp/res/rotary_probe/probe.json --rounds 9
PYTHONPATH=/tmp/site:$PWD step suite_near 330 python3 agent/studies/measure_baselines.py \
  --ops per_token_group_quant_fp8,per_token_quant_fp8,softmax,layer_norm,moe_topk_softmax,rms_norm_quant_fp8,causal_conv1d_update,rotary_embedding \
  --no-variants --rounds 5 --rounds-max-us 10 --max-minutes 4.5 --out /tmp/res/suite_near/out/suite_near.md
touch /tmp/res/all.done
