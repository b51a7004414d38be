# Session 26's first batch (2026-12-06): every operator as committed, every hot shape, beside every baseline,
# on whichever card comes (the H200 last timed the suite on 2026-12-04; sessions 21-25 ran on H100s): the sixteen
# issue-15 operators one process each (new_ops_per_op.sh, no variants), then issue 12's four (measure_baselines,
# 5 rounds below 10 us). Carry .whl (Liger). About 15 minutes: two or three calls of collect.sh.
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
step suite_a 900 env OUT=/tmp/res/suite_a/out OP_TIMEOUT_S=150 bash agent/studies/batch/new_ops_per_op.sh \
  softmax,top_k_top_p_filter,rms_norm_quant_fp8,causal_conv1d_update,moe_align_block_size,rotary_embedding,layer_norm,moe_topk_softmax
step suite_b 900 env OUT=/tmp/res/suite_b/out OP_TIMEOUT_S=150 bash agent/studies/batch/new_ops_per_op.sh \
  l2_norm,gated_rms_norm,moe_sum_reduce,causal_conv1d,fused_add_rms_norm,reshape_and_cache,qk_rms_norm,per_token_quant_fp8,per_token_group_quant_fp8
PYTHONPATH=/tmp/site:$PWD step issue12 420 python3 agent/studies/measure_baselines.py \
  --ops rms_norm,silu_and_mul,gemm,fused_moe --no-variants --rounds 5 --max-minutes 6 --out /tmp/res/issue12/out/h200.md
touch /tmp/res/all.done
