# Session 22's second batch (2026-12-05), started inline at once when session22.sh finished with device time left
# (here as run, but for the cd): moe_align_block_size again with a longer limit (its 100 s in pdl_ops ran out),
# then session21.sh's topk, gemm64 and pdl_rest. pdl_rest ran out of time at moe_topk_softmax (its 90 s),
# so l2_norm, gated_rms_norm and moe_sum_reduce were not timed.
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
step align 170 env OUT=/tmp/res/align/out OP_TIMEOUT_S=165 bash agent/studies/batch/new_ops_per_op.sh moe_align_block_size --variants
step topk 200 env OUT=/tmp/res/topk/out OP_TIMEOUT_S=190 bash agent/studies/batch/new_ops_per_op.sh top_k_top_p_filter --variants
step gemm64 280 python3 agent/studies/config_sweep.py --op gemm_decode --shapes M64-N7168-K8192 --top 8 --confirm 5 \
  --rounds 5 --json /tmp/res/gemm64/sweep.json
step pdl_rest 560 env OUT=/tmp/res/pdl_rest/out OP_TIMEOUT_S=90 bash agent/studies/batch/new_ops_per_op.sh \
  rotary_embedding,qk_rms_norm,fused_add_rms_norm,layer_norm,reshape_and_cache,per_token_group_quant_fp8,moe_topk_softmax,per_token_quant_fp8,l2_norm,gated_rms_norm,moe_sum_reduce \
  --variants --only-variants pdl
touch /tmp/res/all.done
