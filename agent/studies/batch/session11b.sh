# Session 11's second batch (as run): the device machine was handed back between two polls after session11.sh's
# probe and checks had finished (the recovery was lost mid-run), so this runs its two remaining steps on a fresh
# machine. The checks' one failure was the count of the compile-off evaluation (see the results), not the pass.
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
step rec_moe 560 python3 -m agent.studies.recovery --op fused_moe --gpu-minutes 5 --samples 2 --out /tmp/res/rec_moe/out
PYTHONPATH=/tmp/site:$PWD step counters 300 python3 -m agent.studies.missed_counters --baselines --out /tmp/res/counters/out.json
touch /tmp/res/all.done
