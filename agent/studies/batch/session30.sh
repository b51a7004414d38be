# Session 30's batch (written 2026-12-06 in session 29, its device time spent on the diagnosis): what session 29
# left for a GPU, most decisive first. Not run in session 30: no machine came in 13 tries (H200 and H100), which
# spent the session's device time. Run in session 31 on an H100 (BATCH_SKIP="conv copies"): optimize and
# margins_topk finished; optimize_topk and moe_liger ran out of their limits (session32.sh takes those up).
# Carry .whl (Liger). About 14 minutes: two calls of collect.sh; the steps run in the order of what a lost
# machine would cost most (the list below is by topic).
#   optimize   `aka optimize` (offline search) on softmax's T = 64 shapes, 3 GPU-minutes: before session 29's fix
#              (sandbox/interpreter_compat.py, the compile check's control) the search proposed nothing here on an
#              H100 (benchmarks/results/optimize_h200.md, session 29). Does it now run iterations, and does it find
#              a gain? (issue 12, item 3). The run's report says GPU-seconds by role and median stage times.
#   optimize_topk  the same for top_k_top_p_filter at B = 256 from the committed seed, 2 GPU-minutes (session 25's
#              stalled run had the same cause)
#   conv       causal_conv1d_update beside its baselines (9 paired rounds), for h200.md on the H200 (session 29
#              measured it on an H100 only: suite_h100_s29.md)
#   copies     the copy bound of every hot shape on the H200 (sessions 26 and 29 ran it on H100s)
#   margins_topk  top_k_top_p_filter's distance to the correctness gate at full size (session 29's step ran out)
#   moe_liger  fused_moe beside Liger-Kernel 0.8.5's fused MoE (a host-syncing baseline, eager-timed: never
#              measured before; its kernels autotune 32-40 configs on the first call per (H, I), minutes)
# Any card shows whether optimize runs; the numbers of conv and copies go to h200.md only from an H200
# (BATCH_SKIP="conv copies" on another card).
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
mkdir -p /tmp/site && pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
step optimize 240 bash -c "python3 -m agent.cli_optimize --op softmax \
  --shapes agent/studies/batch/shapes/softmax_t64.yaml --proposer search --gpu-minutes 3 --samples 2 \
  --baselines none -c home=/tmp/res/optimize/home -c knowledge.enabled=false; \
  python3 -m agent.studies.run_report /tmp/res/optimize/home/audit.db --json /tmp/res/optimize/report.json"
PYTHONPATH=/tmp/site:$PWD step moe_liger 300 python3 agent/studies/measure_baselines.py --ops fused_moe \
  --only liger --slow-baselines --no-variants --out /tmp/res/moe_liger/out/moe_liger.md
PYTHONPATH=/tmp/site:$PWD step conv 120 python3 agent/studies/measure_baselines.py --ops causal_conv1d_update \
  --no-variants --rounds 9 --rounds-max-us 10 --out /tmp/res/conv/out/conv.md
step optimize_topk 200 bash -c "python3 -m agent.cli_optimize --op top_k_top_p_filter \
  --shapes agent/studies/batch/shapes/top_k_b256.yaml --proposer search --gpu-minutes 2 --samples 2 \
  --baselines none -c home=/tmp/res/optimize_topk/home -c knowledge.enabled=false; \
  python3 -m agent.studies.run_report /tmp/res/optimize_topk/home/audit.db --json /tmp/res/optimize_topk/report.json"
step copies 90 python3 -m agent.studies.copy_floor --out /tmp/res/copies/copy_floor.json --max-t 100000000 \
  --ops causal_conv1d,causal_conv1d_update,fused_add_rms_norm,gated_rms_norm,l2_norm,layer_norm,moe_align_block_size,moe_sum_reduce,moe_topk_softmax,per_token_group_quant_fp8,per_token_quant_fp8,qk_rms_norm,reshape_and_cache,rms_norm,rms_norm_quant_fp8,rotary_embedding,silu_and_mul,softmax,top_k_top_p_filter
step margins_topk 90 python3 -m agent.studies.tolerance_margins --gpu --draws 1 --ops top_k_top_p_filter \
  --out /tmp/res/margins_topk/margins.json
touch /tmp/res/all.done
