# A batch prepared at the end of session 10 for the next session's device time (adapt before running;
# session10.sh is the batch as run). Issue 9's last open item first: the fused_moe recovery reached 0.78 of the
# tuned seed in session 10, its budget spent one acceptance before the move the CPU replay makes next (BLOCK_M
# 64 -> 16). Since then timing-only evaluations no longer time eager launches (14% of a screen) and a winner's
# confirmation is the next screens' bar (no second timing of the new incumbent); this run measures both. Before
# it, the GPU test of the eager change. Issue 12 and 15 steps may follow once their kernels change.
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
step checks 240 python3 -m pytest -q -s -p no:cacheprovider tests/sandbox/test_gpu_sandbox.py -k "timing_only or ab_ or honest_kernel_is_timed"
step rec_moe 560 python3 -m agent.studies.recovery --op fused_moe --gpu-minutes 5 --samples 2 --out /tmp/res/rec_moe/out
touch /tmp/res/all.done
