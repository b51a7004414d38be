# Session 23's batch (written 2026-12-05 without a device): time session 22's new defaults on whichever card comes
# (the H200 first if it can: session 22's were on an H100), beside the defaults they replaced (the variants
# pdl_off, topk_search, ...), then what session 22b did not reach. About 20 minutes; most decisive first.
#   defaults  softmax, moe_align_block_size and top_k_top_p_filter as committed, with their variants (top_k's
#             `tile_skip`, written in session 22 and untimed, among them)
#   pdl_left  the `pdl` variant of the four operators session 22b did not reach (moe_topk_softmax's 90 s ran out)
#   quant16   rms_norm_quant_fp8's variants (w16: the H100 and the H200 disagreed)
#   gemm      gemm's seed beside cuBLAS and torch.compile, 5 rounds up to 60 us (ceilings of the card it runs on)
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
step defaults 480 env OUT=/tmp/res/defaults/out OP_TIMEOUT_S=200 bash agent/studies/batch/new_ops_per_op.sh \
  softmax,moe_align_block_size,top_k_top_p_filter --variants
step pdl_left 360 env OUT=/tmp/res/pdl_left/out OP_TIMEOUT_S=150 bash agent/studies/batch/new_ops_per_op.sh \
  moe_topk_softmax,l2_norm,gated_rms_norm,moe_sum_reduce --variants --only-variants pdl
step quant16 120 env OUT=/tmp/res/quant16/out OP_TIMEOUT_S=110 bash agent/studies/batch/new_ops_per_op.sh \
  rms_norm_quant_fp8 --variants
PYTHONPATH=/tmp/site:$PWD step gemm 240 python3 agent/studies/measure_baselines.py --ops gemm \
  --only cublas,compile --no-variants --rounds 5 --rounds-max-us 60 --max-minutes 3 --out /tmp/res/gemm/out/report.md
touch /tmp/res/all.done
