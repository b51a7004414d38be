# Session 37's batch (written 2026-12-07 in session 36, after the run-floor fix): what the fix and the pending H200
# comparisons need. Carry .whl (Liger). About 9 minutes on an H100, 19 on an H200; one command for either:
#   rm -rf /tmp/repo /tmp/res && cp -a . /tmp/repo && cd /tmp/repo && \
#     (setsid nohup bash agent/studies/batch/session37.sh > /tmp/bg.log 2>&1 < /dev/null &); \
#     sleep 2; bash agent/studies/batch/collect.sh 540
#   gpu_check     tests/sandbox/test_gpu_sandbox.py (about 3 minutes): session 36 changed the worker's floor reply
#                 after its last GPU test run (both launches are kept now)
#   floors        the latency floor launched plainly and under PDL in 12 fresh processes, 3 times each
#                 (agent/studies/floor_spread.py): is the 0.98-1.66 us spread of session 36's trails between
#                 processes or within one, and which launch carries it?
#   s35_changes   (an H200 only) session 35's and 36's seed changes beside what they replaced, 9 paired rounds:
#                 the quantizer tables (`h8192_w16`, `b16k_g4_w4`), `index64`, `bs_runtime`, and
#                 rms_norm_quant_fp8's 16 warps (`w16`, faster at decode on an H100, 1.08x at T8192 here on 12-03)
#   softmax_h200, conv, copies   (an H200 only) session36.sh's steps of the same names
#   search3_<op>  `aka optimize --proposer search`, 1.5 GPU-minutes, every score on the run's floor; then
#                 run_floors (both launches per evaluation) and rescreen over its trail
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || BATCH_SKIP="$BATCH_SKIP s35_changes softmax_h200 conv copies"
batch_begin
mkdir -p /tmp/site && pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
PYTHONPATH=/tmp/site:$PWD step gpu_check 300 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE \
  tests/sandbox/test_gpu_sandbox.py
step floors 150 python3 -m agent.studies.floor_spread --out /tmp/res/floors/floor_spread.json
PYTHONPATH=/tmp/site:$PWD step s35_changes 300 python3 agent/studies/measure_baselines.py \
  --ops per_token_quant_fp8,per_token_group_quant_fp8,reshape_and_cache,rms_norm_quant_fp8 --rounds 9 \
  --rounds-max-us 30 --only seed:h8192_w16,seed:b16k_g4_w4,seed:index64,seed:bs_runtime,seed:w16 \
  --out /tmp/res/s35_changes/out/s35_changes.md
PYTHONPATH=/tmp/site:$PWD step softmax_h200 240 python3 agent/studies/measure_baselines.py --ops softmax \
  --only compile,seed:before_s32 --rounds 5 --rounds-max-us 100 --out /tmp/res/softmax_h200/out/softmax_h200.md
PYTHONPATH=/tmp/site:$PWD step conv 120 python3 agent/studies/measure_baselines.py --ops causal_conv1d_update \
  --no-variants --rounds 9 --rounds-max-us 10 --out /tmp/res/conv/out/conv.md
step copies 90 python3 -m agent.studies.copy_floor --out /tmp/res/copies/copy_floor.json --max-t 100000000 \
  --ops causal_conv1d,causal_conv1d_update,fused_add_rms_norm,gated_rms_norm,l2_norm,layer_norm,moe_align_block_size,moe_sum_reduce,moe_topk_softmax,per_token_group_quant_fp8,per_token_quant_fp8,qk_rms_norm,reshape_and_cache,rms_norm,rms_norm_quant_fp8,rotary_embedding,silu_and_mul,softmax,top_k_top_p_filter
for op in rms_norm_quant_fp8 per_token_group_quant_fp8; do
  step search3_$op 170 bash -c "python3 -m agent.cli_optimize --op $op --shape-set hot --proposer search \
    --gpu-minutes 1.5 --minutes 2.3 --samples 2 --baselines eager,compile -c knowledge.enabled=false \
    -c home=/tmp/res/search3_$op/home; h=/tmp/res/search3_$op/home/audit.db; \
    python3 -m agent.studies.run_report \$h --json /tmp/res/search3_$op/report.json; \
    python3 -m agent.studies.run_floors \$h; python3 -m agent.studies.rescreen \$h"
done
touch /tmp/res/all.done
