# Session 26's third batch (2026-12-06): what a bare device copy of each hot shape's bytes attains (every operator
# but the compute-bound gemm and fused_moe, every hot shape: the most a kernel that moves those bytes can reach
# against issue 15's 0.6), causal_conv1d_update beside its baselines again (measure_baselines checked it on inputs
# the seed's timing had shifted: fixed), and per_token_group_quant_fp8's middle bucket with more groups a program.
# Carry .whl (Liger). Ran on an H100 (the H200 was asked for).
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
mkdir -p /tmp/site && pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
step copies 90 python3 -m agent.studies.copy_floor --out /tmp/res/copies/copy_floor.json --max-t 100000000 \
  --ops causal_conv1d,causal_conv1d_update,fused_add_rms_norm,gated_rms_norm,l2_norm,layer_norm,moe_align_block_size,moe_sum_reduce,moe_topk_softmax,per_token_group_quant_fp8,per_token_quant_fp8,qk_rms_norm,reshape_and_cache,rms_norm,rms_norm_quant_fp8,rotary_embedding,silu_and_mul,softmax,top_k_top_p_filter
PYTHONPATH=/tmp/site:$PWD step conv 130 python3 agent/studies/measure_baselines.py \
  --ops causal_conv1d_update,per_token_group_quant_fp8 --only eager,compile,liger,seed:mid_g16_w4,seed:mid_g32_w8,seed:mid_g16_w8 \
  --rounds 9 --rounds-max-us 10 --max-minutes 2 --out /tmp/res/conv/out/suite_rounds2.md
touch /tmp/res/all.done
