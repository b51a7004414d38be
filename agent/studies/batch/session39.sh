# Session 39's batch (written 2026-12-07 in session 38): which part of a pre-started worker's GPU start-up spreads
# the floor, and what the GPU's lock (benchmarks/gpu_lock.py, off unless AKA_GPU_LOCK is set) costs a search and
# buys it. Session 38 (an H100): fresh processes read 1.43-1.56 us quiet or beside 16 busy loops; beside 3 loops
# of start-ups (context, CUPTI, digest kernel, exit) 0.94-1.64; a search's evaluations 1.00-1.73. No carry needed.
# Session 39 found no machine to run it (the loans were paused) and added the SM clock to every floor, the tick
# floors (GPU work of other contexts without start-ups) and the ctx search (sandbox.gpu_warm_stages=[]).
# About 13 minutes on either card; one command:
#   rm -rf /tmp/repo /tmp/res && cp -a . /tmp/repo && cd /tmp/repo && \
#     (setsid nohup bash agent/studies/batch/session39.sh > /tmp/bg.log 2>&1 < /dev/null &); \
#     sleep 2; bash agent/studies/batch/collect.sh 540
#   floors_<what>  agent/studies/floor_spread.py, 4 fresh processes x 20 floors each (and the SM clock after each),
#                  beside 3 loops of start-ups: quiet (none), all (every stage, then exit), tick (no start-ups: 3
#                  processes launching a tiny kernel every millisecond), ctx (the context only), cupti (context +
#                  CUPTI), digest (context + digest kernel), linger (every stage, then 20 s idle: few exits), lock
#                  (every stage, the lock on: start-up stages and timed phases wait for each other)
#   search_<how>   `aka optimize --proposer search`, 1 GPU-minute, rms_norm_quant_fp8: off (as committed), lock (the
#                  lock on), ctx (the spares start only their context: -c sandbox.gpu_warm_stages=[]); run_floors
#                  prints the evaluations' floors and lock waits; run_report the candidates a GPU-minute
#   timer_tests    the timer's and the hold's GPU tests with the lock on (nested: the phase's and each batch's)
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
floors() {   # floors NAME ARGS...: one floor study into /tmp/res/floors_NAME
  local name=$1; shift
  step floors_$name 120 python3 -m agent.studies.floor_spread --processes 4 --repeats 20 "$@" \
    --out /tmp/res/floors_$name/floors.json
}
floors quiet
floors all --spares 3
floors tick --gpu-tick 3
floors ctx --spares 3 --spare-stages ""
floors cupti --spares 3 --spare-stages profiler_init
floors digest --spares 3 --spare-stages digest_compile
floors linger --spares 3 --spare-linger 20
floors lock --spares 3 --lock
search() {   # search NAME LOCK [-c ...]: one search into /tmp/res/search_NAME, AKA_GPU_LOCK=LOCK
  local name=$1 lock=$2 d=/tmp/res/search_$1; shift 2
  AKA_GPU_LOCK=$lock step search_$name 150 bash -c "python3 -m agent.cli_optimize --op rms_norm_quant_fp8 \
    --shape-set hot --proposer search --gpu-minutes 1 --minutes 1.8 --samples 2 --baselines eager,compile \
    -c knowledge.enabled=false -c home=$d/home $*; python3 -m agent.studies.run_report $d/home/audit.db \
    --json $d/report.json; python3 -m agent.studies.run_floors $d/home/audit.db"
}
search off off
search lock on
search ctx off -c sandbox.gpu_warm_stages=[]
AKA_GPU_LOCK=on step timer_tests 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE \
  tests/benchmarks/test_timer_hold.py tests/sandbox/test_timing.py
touch /tmp/res/all.done
