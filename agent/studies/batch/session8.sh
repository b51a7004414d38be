# The batch of 2026-12-02 (session 8), as run: steps one after another in their own process session (see README.md),
# in the order of what is owed: GPU checks of this session's compile-ahead pass; a 5-GPU-minute silu_and_mul run
# with four spares and no inductor import (candidates per GPU-minute, issue 9); the fused_moe recovery with tied
# moves, compile ahead and no baselines; issue 15's seed variants on every hot shape beside eager, static
# torch.compile and Liger (two commands), top_k_top_p_filter's multi-way search among them; a 5-GPU-minute gemm run.
export PYTHONUNBUFFERED=1
mkdir -p /tmp/res
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD
source agent/studies/batch/steps.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > /tmp/res/gpu.txt
pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
step checks 120 python3 -m pytest -q -s -p no:cacheprovider tests/sandbox/test_compile_ahead_gpu.py tests/sandbox/test_compile_ahead.py
AKA_HOME=/tmp/res/opt_silu/home step opt_silu 420 python3 -m agent.cli optimize --op silu_and_mul --shape-set hot --gpu-minutes 5 --iterations 400
step rec_moe 600 python3 -m agent.studies.recovery --op fused_moe --gpu-minutes 5 --samples 2 --out /tmp/res/rec_moe/out
PYTHONPATH=/tmp/site:$PWD step ops15_a 270 python3 -m agent.studies.measure_new_ops --out /tmp/res/ops15_a/out --ops layer_norm,qk_rms_norm,fused_add_rms_norm --max-shapes 0 --variants --jobs 14
PYTHONPATH=/tmp/site:$PWD step ops15_b 300 python3 -m agent.studies.measure_new_ops --out /tmp/res/ops15_b/out --ops softmax,per_token_group_quant_fp8,moe_topk_softmax,top_k_top_p_filter --max-shapes 0 --variants --jobs 14
AKA_HOME=/tmp/res/opt_gemm/home step opt_gemm 420 python3 -m agent.cli optimize --op gemm --shape-set hot --gpu-minutes 5 --iterations 400
touch /tmp/res/all.done
