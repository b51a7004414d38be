# Session 21's batch (written without a GPU, 2026-12-04): time what sessions 20-21 committed untimed, one step
# each, most decisive first (checks, decode9, gemm_pdl, pdl_ops, moe, copies, gemm64, topk, pdl_rest). About 35
# minutes in all, more than a session's device time: start it as batch/README.md says, poll with collect.sh, and
# leave the last steps to the next session if need be.
#   checks    the GPU tests of the new switches (fused_moe's atomic ranks, top_k_top_p_filter's radix select, PDL)
#             and of the floor under PDL (the score now takes the lesser floor: check it first)
#   moe       fused_moe's seed and variants beside each other (align_atomic among them), every hot shape
#   topk      top_k_top_p_filter's variants (topk_radix among them), every hot shape
#   gemm64    the M <= 64 tile sweep at M64-N7168-K8192, its 5 fastest confirmed in 5 interleaved rounds with
#             the seed and cuBLAS (issue 12: >= 1.05x cuBLAS at M <= 64)
#   copies    a device copy of every new operator's decode-size bytes: the attainment at a copy's time
#   decode9   rms_norm and silu_and_mul beside torch.compile and Liger in 9 interleaved rounds: the paired-rounds
#             interval without its two extremes (96%), for the 1.02x / 1.0x targets 5 rounds left undecided (their
#             variants include `pdl`)
#   pdl_ops   the variants (`pdl` among them) of the four issue-15 operators that have the PDL switch (topk: its own)
#   gemm_pdl  gemm's seed and its `pdl` variant beside cuBLAS and torch.compile, 5 rounds up to 60 us (M64 and M256):
#             the paired-rounds verdict of the 1.05x / 1.0x targets
#   pdl_rest  the seed and its `pdl` variant alone of the eleven other operators that have the switch
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
step checks 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/benchmarks/test_op_fused_moe.py \
  tests/benchmarks/test_op_top_k_top_p_filter.py tests/benchmarks/test_pdl_seeds.py tests/sandbox/test_timing.py \
  tests/sandbox/test_compile_ahead_gpu.py \
  -k "atomic or radix or pdl or compile_ahead"
PYTHONPATH=/tmp/site:$PWD step decode9 300 python3 agent/studies/measure_baselines.py --ops rms_norm,silu_and_mul \
  --rounds 9 --max-minutes 4 --out /tmp/res/decode9/out/h200.md
PYTHONPATH=/tmp/site:$PWD step gemm_pdl 300 python3 agent/studies/measure_baselines.py --ops gemm \
  --only seed:pdl,cublas,compile --rounds 5 --rounds-max-us 60 --max-minutes 4 --out /tmp/res/gemm_pdl/out/h200.md
step pdl_ops 450 env OUT=/tmp/res/pdl_ops/out OP_TIMEOUT_S=110 bash agent/studies/batch/new_ops_per_op.sh \
  rms_norm_quant_fp8,causal_conv1d_update,moe_align_block_size,softmax --variants
step moe 200 python3 agent/studies/measure_baselines.py --ops fused_moe --out /tmp/res/moe/out/h200.md --max-minutes 3
step copies 90 python3 -m agent.studies.copy_floor --out /tmp/res/copies/copy_floor.json --max-t 256 \
  --ops fused_add_rms_norm,rotary_embedding,qk_rms_norm,per_token_quant_fp8,per_token_group_quant_fp8,rms_norm_quant_fp8,moe_topk_softmax,moe_align_block_size,moe_sum_reduce,reshape_and_cache,l2_norm,gated_rms_norm,layer_norm,softmax,causal_conv1d_update,top_k_top_p_filter
step gemm64 280 python3 agent/studies/config_sweep.py --op gemm_decode --shapes M64-N7168-K8192 --top 8 --confirm 5 \
  --rounds 5 --json /tmp/res/gemm64/sweep.json
step topk 200 env OUT=/tmp/res/topk/out OP_TIMEOUT_S=190 bash agent/studies/batch/new_ops_per_op.sh top_k_top_p_filter --variants
step pdl_rest 560 env OUT=/tmp/res/pdl_rest/out OP_TIMEOUT_S=90 bash agent/studies/batch/new_ops_per_op.sh \
  rotary_embedding,qk_rms_norm,fused_add_rms_norm,layer_norm,reshape_and_cache,per_token_group_quant_fp8,moe_topk_softmax,per_token_quant_fp8,l2_norm,gated_rms_norm,moe_sum_reduce \
  --variants --only-variants pdl
touch /tmp/res/all.done
