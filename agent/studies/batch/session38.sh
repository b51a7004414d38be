# Session 38's batch (written 2026-12-07 in session 37): is the floor's spread in the searches the busy host's, and
# does the hold before every timed batch (benchmarks/gpu_timer.py held_batch, untimed when written) keep it still?
# Carry .whl (Liger). About 14 minutes on an H100, 24 on an H200; one command for either:
#   rm -rf /tmp/repo /tmp/res && cp -a . /tmp/repo && cd /tmp/repo && \
#     (setsid nohup bash agent/studies/batch/session38.sh > /tmp/bg.log 2>&1 < /dev/null &); \
#     sleep 2; bash agent/studies/batch/collect.sh 540
#   floors_<load>_<hold>  agent/studies/floor_spread.py, 6 fresh processes x 3, quiet (load 0) or beside one
#                 busy-looping process per core, with the hold or without: session 37 read 1.42-1.54 us in quiet
#                 processes and 1.06-1.73 in the searches' evaluations, beside their compile pool
#   gpu_check     the hold's GPU test (every core busy), the timer's GPU tests, the GPU sandbox tests, the
#                 loop's GPU run (its A/B rounds go through gpu_timer.timed_pairs since session 37)
#   pdl           layer_norm's and rms_norm_quant_fp8's `pdl` beside their seeds, 9 paired rounds: session 37's
#                 searches accepted PDL on both (A/B 1.015 and 1.008, unheld); session 36's rounds had it 1-2% slower
#   search4_rms_norm_quant_fp8  `aka optimize --proposer search` with the hold: run_floors prints the evaluations'
#                 floors and their hold counts (batches, held, retried, unheld)
#   s35_changes, softmax_h200, conv, copies   (an H200 only) session37.sh's steps of the same names
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || BATCH_SKIP="$BATCH_SKIP s35_changes softmax_h200 conv copies"
batch_begin
mkdir -p /tmp/site && pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
cores=$(nproc)
step floors_0_hold 120 python3 -m agent.studies.floor_spread --processes 6 --out /tmp/res/floors_0_hold/floors.json
step floors_0_nohold 120 python3 -m agent.studies.floor_spread --processes 6 --no-hold \
  --out /tmp/res/floors_0_nohold/floors.json
step floors_load_hold 150 python3 -m agent.studies.floor_spread --processes 6 --load $cores \
  --out /tmp/res/floors_load_hold/floors.json
step floors_load_nohold 150 python3 -m agent.studies.floor_spread --processes 6 --load $cores --no-hold \
  --out /tmp/res/floors_load_nohold/floors.json
PYTHONPATH=/tmp/site:$PWD step gpu_check 420 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE \
  tests/benchmarks/test_timer_hold.py tests/sandbox/test_timing.py tests/sandbox/test_gpu_sandbox.py \
  tests/agent/test_loop.py
PYTHONPATH=/tmp/site:$PWD step pdl 200 python3 agent/studies/measure_baselines.py \
  --ops layer_norm,rms_norm_quant_fp8 --rounds 9 --rounds-max-us 30 --only seed:pdl \
  --out /tmp/res/pdl/out/pdl.md
step search4_rms_norm_quant_fp8 200 bash -c "python3 -m agent.cli_optimize --op rms_norm_quant_fp8 --shape-set hot \
  --proposer search --gpu-minutes 1.5 --minutes 2.5 --samples 2 --baselines eager,compile -c knowledge.enabled=false \
  -c home=/tmp/res/search4_rms_norm_quant_fp8/home; h=/tmp/res/search4_rms_norm_quant_fp8/home/audit.db; \
  python3 -m agent.studies.run_report \$h --json /tmp/res/search4_rms_norm_quant_fp8/report.json; \
  python3 -m agent.studies.run_floors \$h; python3 -m agent.studies.rescreen \$h"
PYTHONPATH=/tmp/site:$PWD step s35_changes 300 python3 agent/studies/measure_baselines.py \
  --ops per_token_quant_fp8,per_token_group_quant_fp8,reshape_and_cache,rms_norm_quant_fp8 --rounds 9 \
  --rounds-max-us 30 --only seed:h8192_w16,seed:b16k_g4_w4,seed:index64,seed:bs_runtime,seed:w16 \
  --out /tmp/res/s35_changes/out/s35_changes.md
PYTHONPATH=/tmp/site:$PWD step softmax_h200 240 python3 agent/studies/measure_baselines.py --ops softmax \
  --only compile,seed:before_s32 --rounds 5 --rounds-max-us 100 --out /tmp/res/softmax_h200/out/softmax_h200.md
PYTHONPATH=/tmp/site:$PWD step conv 120 python3 agent/studies/measure_baselines.py --ops causal_conv1d_update \
  --no-variants --rounds 9 --rounds-max-us 10 --out /tmp/res/conv/out/conv.md
step copies 90 python3 -m agent.studies.copy_floor --out /tmp/res/copies/copy_floor.json --max-t 100000000 \
  --ops causal_conv1d,causal_conv1d_update,fused_add_rms_norm,gated_rms_norm,l2_norm,layer_norm,moe_align_block_size,moe_sum_reduce,moe_topk_softmax,per_token_group_quant_fp8,per_token_quant_fp8,qk_rms_norm,reshape_and_cache,rms_norm,rms_norm_quant_fp8,rotary_embedding,silu_and_mul,softmax,top_k_top_p_filter
touch /tmp/res/all.done
