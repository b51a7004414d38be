# Session 36's second call (written 2026-12-07 after session36.sh's searches, on an H100): what they left to decide,
# with about 12 minutes of device time left. Carry .whl (Liger). One call:
#   (setsid nohup bash agent/studies/batch/session36b.sh > /tmp/bg.log 2>&1 < /dev/null &); sleep 2; \
#     bash agent/studies/batch/collect.sh 500
#   rms_q        rms_norm_quant_fp8's seed beside what the search accepted on an H100 (`w16_pdl`: 16 warps for rows
#                of 8192 and PDL) and each change alone (`w16`, `pdl`), 9 paired rounds
#   offline      session 35's two untimed index changes beside what they replaced (`index64`: per_token_group_quant's
#                64-bit index division; `bs_runtime`: reshape_and_cache's runtime block size), 9 paired rounds
#   tables       (an H200 only) session 35's two quantizer tables beside the ones they replaced (H100-decided)
#   softmax_h200 (an H200 only) session36.sh's softmax step
#   search_rms_norm (not an H200) `aka optimize --proposer search` on rms_norm's hot shapes, 2.5 GPU-minutes: issue
#                12's 1.02x at T16-H512 is its one miss
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  BATCH_SKIP="$BATCH_SKIP search_rms_norm"
else
  BATCH_SKIP="$BATCH_SKIP tables softmax_h200"
fi
batch_begin
mkdir -p /tmp/site && pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
PYTHONPATH=/tmp/site:$PWD step rms_q 150 python3 agent/studies/measure_baselines.py --ops rms_norm_quant_fp8 \
  --only compile,seed:w16,seed:pdl,seed:w16_pdl --rounds 9 --rounds-max-us 30 --out /tmp/res/rms_q/out/rms_q.md
PYTHONPATH=/tmp/site:$PWD step offline 200 python3 agent/studies/measure_baselines.py \
  --ops per_token_group_quant_fp8,reshape_and_cache --rounds 9 --rounds-max-us 30 \
  --only seed:index64,seed:bs_runtime --out /tmp/res/offline/out/offline.md
PYTHONPATH=/tmp/site:$PWD step tables 150 python3 agent/studies/measure_baselines.py \
  --ops per_token_quant_fp8,per_token_group_quant_fp8 --rounds 9 --rounds-max-us 30 \
  --only seed:h8192_w16,seed:b16k_g4_w4 --out /tmp/res/tables/out/tables.md
PYTHONPATH=/tmp/site:$PWD step softmax_h200 240 python3 agent/studies/measure_baselines.py --ops softmax \
  --only compile,seed:before_s32 --rounds 5 --rounds-max-us 100 --out /tmp/res/softmax_h200/out/softmax_h200.md
step search_rms_norm 240 bash -c "python3 -m agent.cli_optimize --op rms_norm --shape-set hot --proposer search \
  --gpu-minutes 2.5 --minutes 3.5 --samples 2 --baselines none -c knowledge.enabled=false \
  -c home=/tmp/res/search_rms_norm/home; \
  python3 -m agent.studies.run_report /tmp/res/search_rms_norm/home/audit.db --json /tmp/res/search_rms_norm/report.json"
touch /tmp/res/all.done
