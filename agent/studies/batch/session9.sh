# Session 9's batch (as run). Order: the compile-ahead GPU test first (if it fails, the steps after it run with
# `-c sandbox.compile_ahead=false`), then what issue 9 still owes: a 5-GPU-minute rms_norm run from its seed
# (>= 10 candidates a GPU-minute over the whole run), the fused_moe recovery, 5-GPU-minute runs of fused_moe and
# gemm from their seeds; then issue 15's remaining variants if the session's device time still holds them.
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
step checks 150 python3 -m pytest -q -s -p no:cacheprovider tests/sandbox/test_compile_ahead_gpu.py tests/sandbox/test_compile_ahead.py
if grep -q " failed" /tmp/res/checks/log; then AHEAD="-c sandbox.compile_ahead=false"; else AHEAD=""; fi
AKA_HOME=/tmp/res/opt_rms/home step opt_rms 400 python3 -m agent.cli optimize --op rms_norm --shape-set hot --gpu-minutes 5 --iterations 400 $AHEAD
step rec_moe 560 python3 -m agent.studies.recovery --op fused_moe --gpu-minutes 5 --samples 2 --out /tmp/res/rec_moe/out $AHEAD
AKA_HOME=/tmp/res/opt_moe/home step opt_moe 420 python3 -m agent.cli optimize --op fused_moe --shape-set hot --gpu-minutes 5 --iterations 400 $AHEAD
AKA_HOME=/tmp/res/opt_gemm/home step opt_gemm 400 python3 -m agent.cli optimize --op gemm --shape-set hot --gpu-minutes 5 --iterations 400 $AHEAD
PYTHONPATH=/tmp/site:$PWD step ops15_c 200 python3 -m agent.studies.measure_new_ops --out /tmp/res/ops15_c/out --ops top_k_top_p_filter,causal_conv1d_update,rotary_embedding,layer_norm --max-shapes 0 --variants --jobs 10
touch /tmp/res/all.done
