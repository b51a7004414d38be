# Session 35's second call (written 2026-12-07 with about 5 minutes of device time left): what this card can decide.
# Carry .whl. One call: `bash agent/studies/batch/session35b.sh; bash agent/studies/batch/collect.sh 250`.
# - An H200: session35.sh's H200 steps (quant_warps, softmax_h200, conv, copies; about 4 minutes), the tests and
#   moe_liger left out (session 35 ran them on an H100).
# - Another card: `aka optimize`'s offline search from per_token_quant_fp8's seed as committed (rows of 7168 on 8
#   warps since session 35's hand sweep) on its hot shapes, 2.5 GPU-minutes: does the search find more in the
#   tables than the sweep did (each bucket's ROWS and num_warps are slots it moves)?
cd "$(dirname "$0")/../../.."
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (BATCH_SKIP="gpu_sandbox gpu_benchmarks moe_liger" setsid nohup bash agent/studies/batch/session35.sh \
    > /tmp/bg.log 2>&1 < /dev/null &)
  exit 0
fi
(setsid nohup bash -c 'source agent/studies/batch/steps.sh; batch_begin
  step ptq_search 230 python3 -m agent.cli_optimize --op per_token_quant_fp8 --shape-set hot --proposer search \
    --gpu-minutes 2.5 --minutes 3.5 --samples 2 --baselines none -c knowledge.enabled=false \
    -c home=/tmp/res/ptq_search/home
  touch /tmp/res/all.done' > /tmp/bg.log 2>&1 < /dev/null &)
