# Session 36's batch (written 2026-12-07 in session 35): the H200's pending comparisons first (on an H200 only), then
# `aka optimize`'s offline search on the operators whose median attainment misses issue 15's 0.6 by the least (any
# card). Carry .whl (Liger). About 26 minutes on an H200, 21 on another card: three calls of collect.sh.
#   s35_changes     session 35's seed changes beside what they replaced, 9 paired rounds: per_token_quant_fp8's and
#                   per_token_group_quant_fp8's tables (`h8192_w16`, `b16k_g4_w4`), the group quantizer's int64 index
#                   division (`index64`) and reshape_and_cache's runtime block size (`bs_runtime`): keep each change
#                   only if no hot shape is slower on the H200
#   softmax_h200    softmax's seed (session 32) beside `seed:before_s32` and torch.compile, 5 paired rounds: keep the
#                   pair only if T = 64 is faster and no hot shape slower on the H200
#   conv            causal_conv1d_update beside its baselines (9 paired rounds), for h200.md
#   copies          the copy bound of every hot shape on the H200 (sessions 26 and 29 ran it on H100s)
#   search_<op>     `aka optimize --proposer search` on the operator's hot shapes, 2.5 GPU-minutes (3.5 wall), for
#                   the B misses nearest 0.6 on the H200: per_token_group_quant_fp8 0.598, rotary_embedding 0.581,
#                   moe_topk_softmax 0.566, layer_norm 0.549, rms_norm_quant_fp8 0.468. Session 35's search on
#                   per_token_quant_fp8 (H100) made 54 candidates in 2.5 GPU-minutes. A candidate accepted on an H100
#                   becomes a seed variant to time on the H200 before it becomes the seed.
# The first four steps run on an H200 only: the script adds them to BATCH_SKIP on any other card.
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || BATCH_SKIP="$BATCH_SKIP s35_changes softmax_h200 conv copies"
batch_begin
mkdir -p /tmp/site && pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
PYTHONPATH=/tmp/site:$PWD step s35_changes 240 python3 agent/studies/measure_baselines.py \
  --ops per_token_quant_fp8,per_token_group_quant_fp8,reshape_and_cache --rounds 9 --rounds-max-us 30 \
  --only seed:h8192_w16,seed:b16k_g4_w4,seed:index64,seed:bs_runtime --out /tmp/res/s35_changes/out/s35_changes.md
PYTHONPATH=/tmp/site:$PWD step softmax_h200 240 python3 agent/studies/measure_baselines.py --ops softmax \
  --only compile,seed:before_s32 --rounds 5 --rounds-max-us 100 --out /tmp/res/softmax_h200/out/softmax_h200.md
PYTHONPATH=/tmp/site:$PWD step conv 120 python3 agent/studies/measure_baselines.py --ops causal_conv1d_update \
  --no-variants --rounds 9 --rounds-max-us 10 --out /tmp/res/conv/out/conv.md
step copies 90 python3 -m agent.studies.copy_floor --out /tmp/res/copies/copy_floor.json --max-t 100000000 \
  --ops causal_conv1d,causal_conv1d_update,fused_add_rms_norm,gated_rms_norm,l2_norm,layer_norm,moe_align_block_size,moe_sum_reduce,moe_topk_softmax,per_token_group_quant_fp8,per_token_quant_fp8,qk_rms_norm,reshape_and_cache,rms_norm,rms_norm_quant_fp8,rotary_embedding,silu_and_mul,softmax,top_k_top_p_filter
for op in per_token_group_quant_fp8 rotary_embedding moe_topk_softmax layer_norm rms_norm_quant_fp8; do
  step search_$op 240 bash -c "python3 -m agent.cli_optimize --op $op --shape-set hot --proposer search \
    --gpu-minutes 2.5 --minutes 3.5 --samples 2 --baselines none -c knowledge.enabled=false \
    -c home=/tmp/res/search_$op/home; \
    python3 -m agent.studies.run_report /tmp/res/search_$op/home/audit.db --json /tmp/res/search_$op/report.json"
done
touch /tmp/res/all.done
