# The batch of session 10 (2026-12-02), as run. Issue 9's three runs first, since only they can close it: the
# GPU tests of session 9's sandbox changes (an A/B's kernels load their own sealed caches; compile ahead), the
# fused_moe recovery (in session 9 its four A/Bs took 105 of its 309 GPU-seconds, compiling every
# specialization inside the A/B), 5-GPU-minute runs of fused_moe and gemm from their seeds (session 8's gemm run
# stopped at 4.6), then each run's seed against its final in one worker; after them issue 12's seeds beside
# their baselines and the copy floor, and issue 15's rotary, top_k and causal_conv1d_update variants. Session 9's
# rms_norm audit trail did not survive into this session's checkout, so its seed_vs_final step is gone.
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
step checks 240 python3 -m pytest -q -s -p no:cacheprovider tests/sandbox/test_compile_ahead_gpu.py tests/sandbox/test_gpu_sandbox.py -k "ab_ or compile_ahead"
if grep -q " failed" /tmp/res/checks/log; then AHEAD="-c sandbox.compile_ahead=false"; else AHEAD=""; fi
step rec_moe 560 python3 -m agent.studies.recovery --op fused_moe --gpu-minutes 5 --samples 2 --out /tmp/res/rec_moe/out $AHEAD
AKA_HOME=/tmp/res/opt_moe/home step opt_moe 420 python3 -m agent.cli optimize --op fused_moe --shape-set hot --gpu-minutes 5 --iterations 400 $AHEAD
AKA_HOME=/tmp/res/opt_gemm/home step opt_gemm 400 python3 -m agent.cli optimize --op gemm --shape-set hot --gpu-minutes 5 --iterations 400 $AHEAD
step svf_moe 150 python3 -m agent.studies.seed_vs_final /tmp/res/opt_moe/home --out /tmp/res/svf_moe/out.json
step svf_gemm 150 python3 -m agent.studies.seed_vs_final /tmp/res/opt_gemm/home --out /tmp/res/svf_gemm/out.json
step copy_floor 90 python3 -m agent.studies.copy_floor --out /tmp/res/copy_floor/out.json
PYTHONPATH=/tmp/site:$PWD step base 240 python3 agent/studies/measure_baselines.py --out /tmp/res/base/out/h200.md --max-minutes 3
PYTHONPATH=/tmp/site:$PWD step ops15_d 220 python3 -m agent.studies.measure_new_ops --out /tmp/res/ops15_d/out --ops rotary_embedding,top_k_top_p_filter,causal_conv1d_update --max-shapes 0 --variants --jobs 10
touch /tmp/res/all.done
