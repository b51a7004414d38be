# Session 27's batch (written 2026-12-06 in session 26, after its device time ran out): what session 26 left for
# the H200, most decisive first (session 27 moved the optimize run last: one call may be all it gets).
# Carry .whl (Liger). About 15 minutes: two calls of collect.sh.
#   conv      causal_conv1d_update beside its baselines (session 26's H200 run checked them on a shifted state,
#             the script's bug, fixed; the H100 rerun put the seed 2.0-2.6x ahead of torch.compile)
#   softmax   8192-wide steps in the two passes (T = 64 at 0.51-0.52 of its roofline), the one-read wait polling
#             by volatile loads (ONE_READ_POLL_LOADS, T = 256), 5 paired rounds
#   checks    the one-read path on the GPU, ten calls a shape against the reference, polls by atomics and by loads
#   margins   how close every honest kernel comes to the correctness gate's bounds at full size in bf16 (session 28:
#             on the CPU all were under 0.07 of the bound once causal_conv1d's CI failure was fixed; the JSON is
#             saved after each source, so a cut-off step keeps the operators it did)
#   counters  Nsight Compute of softmax's one-read path at T = 256 (74 us where an H100's copy of its bytes reached
#             0.88 of that card's bandwidth) and of the decode shapes that keep five operators under issue 15's 0.6
#   copies    the copy bound of every hot shape on the H200 (session 26's ran on an H100)
#   optimize  whether `aka optimize` (offline search) finds a wider step for softmax's T = 64 shapes by itself
#             (BLOCK_V and num_warps are slots of its CONFIGS), 3 GPU-minutes (issue 12, item 3)
# Then on this machine: python -m agent.studies.merge_baseline_runs benchmarks/results/h200_records/s26_run{1,2,3}
# _records.json <conv and softmax records.json> --out benchmarks/results/h200.md (same card only).
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
mkdir -p /tmp/site && pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
PYTHONPATH=/tmp/site:$PWD step conv 120 python3 agent/studies/measure_baselines.py --ops causal_conv1d_update \
  --no-variants --rounds 9 --rounds-max-us 10 --out /tmp/res/conv/out/conv.md
PYTHONPATH=/tmp/site:$PWD step softmax 200 python3 agent/studies/measure_baselines.py --ops softmax \
  --only compile,seed:steps8192,seed:steps8192_w16,seed:two_pass,seed:one_read_poll_loads --rounds 5 --rounds-max-us 30 \
  --out /tmp/res/softmax/out/softmax.md
step checks 90 python3 -m pytest -q -m gpu tests/benchmarks/test_op_softmax.py -k "one_read_on_the_gpu"
step margins 150 python3 -m agent.studies.tolerance_margins --gpu --draws 1 --out /tmp/res/margins/margins.json
for op_shape in softmax:T256-V129280 layer_norm:T64-H4096 per_token_quant_fp8:T64-H7168 \
    rms_norm_quant_fp8:T64-H8192 moe_topk_softmax:T256-E128-k8 rotary_embedding:T256-Hq8-Hk1-D128; do
  op=${op_shape%%:*}; shape=${op_shape#*:}
  step counters_$op 90 python3 -m agent.studies.variant_counters --op $op --shapes $shape --variants seed \
    --out /tmp/res/counters_$op/counters.json --timeout-s 60
done
step copies 90 python3 -m agent.studies.copy_floor --out /tmp/res/copies/copy_floor.json --max-t 100000000 \
  --ops causal_conv1d,causal_conv1d_update,fused_add_rms_norm,gated_rms_norm,l2_norm,layer_norm,moe_align_block_size,moe_sum_reduce,moe_topk_softmax,per_token_group_quant_fp8,per_token_quant_fp8,qk_rms_norm,reshape_and_cache,rms_norm,rms_norm_quant_fp8,rotary_embedding,silu_and_mul,softmax,top_k_top_p_filter
step optimize 260 bash -c "python3 -m agent.cli_optimize --op softmax \
  --shapes agent/studies/batch/shapes/softmax_t64.yaml --proposer search --gpu-minutes 3 --samples 2 \
  --baselines none -c home=/tmp/res/optimize/home -c knowledge.enabled=false; \
  python3 -m agent.studies.run_report /tmp/res/optimize/home/audit.db --json /tmp/res/optimize/report.json"
touch /tmp/res/all.done
