# Session 22's batch (2026-12-05): session21.sh's steps that fit one session's 30 device minutes, most decisive
# first (checks, decode9, gemm_pdl, pdl_ops, moe, copies); session21.sh's gemm64, topk and pdl_rest wait for the
# next session. Start and poll it as batch/README.md says (carry .whl for Liger).
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
step checks 180 python3 -m pytest -q -m gpu -p no:cacheprovider tests/benchmarks/test_op_fused_moe.py \
  tests/benchmarks/test_op_top_k_top_p_filter.py tests/benchmarks/test_pdl_seeds.py tests/sandbox/test_timing.py \
  tests/sandbox/test_compile_ahead_gpu.py \
  -k "atomic or radix or pdl or compile_ahead"
PYTHONPATH=/tmp/site:$PWD step decode9 300 python3 agent/studies/measure_baselines.py --ops rms_norm,silu_and_mul \
  --rounds 9 --max-minutes 4 --out /tmp/res/decode9/out/h200.md
PYTHONPATH=/tmp/site:$PWD step gemm_pdl 240 python3 agent/studies/measure_baselines.py --ops gemm \
  --only seed:pdl,cublas,compile --rounds 5 --rounds-max-us 60 --max-minutes 3 --out /tmp/res/gemm_pdl/out/h200.md
step pdl_ops 400 env OUT=/tmp/res/pdl_ops/out OP_TIMEOUT_S=100 bash agent/studies/batch/new_ops_per_op.sh \
  rms_norm_quant_fp8,causal_conv1d_update,moe_align_block_size,softmax --variants
step moe 200 python3 agent/studies/measure_baselines.py --ops fused_moe --out /tmp/res/moe/out/h200.md --max-minutes 3
step copies 90 python3 -m agent.studies.copy_floor --out /tmp/res/copies/copy_floor.json --max-t 256 \
  --ops fused_add_rms_norm,rotary_embedding,qk_rms_norm,per_token_quant_fp8,per_token_group_quant_fp8,rms_norm_quant_fp8,moe_topk_softmax,moe_align_block_size,moe_sum_reduce,reshape_and_cache,l2_norm,gated_rms_norm,layer_norm,softmax,causal_conv1d_update,top_k_top_p_filter
touch /tmp/res/all.done
