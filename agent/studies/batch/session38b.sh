# Session 38's second batch (2026-12-07): do pre-started workers' GPU start-ups spread the floor, and does the
# GPU's lock (benchmarks/gpu_lock.py, untimed when written) keep it still? The first batch (session38.sh, an
# H100) read 1.43-1.56 us in fresh processes, quiet or beside 16 busy loops, with the hold or without, and
# 1.00-1.73 inside a search whose every batch was held. It ran (BATCH_SKIP="floors_quiet timer_tests",
# SEARCH_GPU_MINUTES=0.8) at commit 910a223, when the lock was on by default and taken per timed batch and the
# floor study's flag was --no-lock; the lock is off by default since, and --lock turns it on (written below so).
# Found: beside the start-ups 0.94-1.64 us; with the lock the study did not finish in 150 s (session38_h100.md).
# About 5 minutes; one command for either card:
#   rm -rf /tmp/repo /tmp/res && cp -a . /tmp/repo && cd /tmp/repo && \
#     (setsid nohup bash agent/studies/batch/session38b.sh > /tmp/bg.log 2>&1 < /dev/null &); \
#     sleep 2; bash agent/studies/batch/collect.sh 540
#   floors_quiet / floors_spares_nolock / floors_spares_lock   agent/studies/floor_spread.py, 4 fresh processes x
#                 20, alone or beside 3 loops of worker GPU start-ups (sandbox/worker.py warm_gpu), the lock off
#                 or on (--lock)
#   timer_tests   the hold's GPU test and the lock's tests
#   search5_rms_norm_quant_fp8  session38.sh's search4 again, the lock on: run_floors prints the evaluations'
#                 floors and their hold and lock counts (SEARCH_GPU_MINUTES, 1.5 unless set: less where the
#                 session's device time is short)
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
step floors_quiet 90 python3 -m agent.studies.floor_spread --processes 4 --repeats 20 \
  --out /tmp/res/floors_quiet/floors.json
step floors_spares_nolock 150 python3 -m agent.studies.floor_spread --processes 4 --repeats 20 --spares 3 \
  --out /tmp/res/floors_spares_nolock/floors.json
step floors_spares_lock 150 python3 -m agent.studies.floor_spread --processes 4 --repeats 20 --spares 3 --lock \
  --out /tmp/res/floors_spares_lock/floors.json
step timer_tests 120 python3 -m pytest -q -p no:cacheprovider -rfE tests/benchmarks/test_timer_hold.py \
  tests/benchmarks/test_gpu_lock.py
AKA_GPU_LOCK=on step search5_rms_norm_quant_fp8 220 bash -c "python3 -m agent.cli_optimize --op rms_norm_quant_fp8 --shape-set hot \
  --proposer search --gpu-minutes ${SEARCH_GPU_MINUTES:-1.5} --minutes 2.5 --samples 2 --baselines eager,compile -c knowledge.enabled=false \
  -c home=/tmp/res/search5_rms_norm_quant_fp8/home; h=/tmp/res/search5_rms_norm_quant_fp8/home/audit.db; \
  python3 -m agent.studies.run_report \$h --json /tmp/res/search5_rms_norm_quant_fp8/report.json; \
  python3 -m agent.studies.run_floors \$h; python3 -m agent.studies.rescreen \$h"
touch /tmp/res/all.done
