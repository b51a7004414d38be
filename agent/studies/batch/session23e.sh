# Session 23's last batch (2026-12-06), for an H200 if one is lent: session23c.sh's moe and bounds steps with the seed
# as committed (PDL on, the T256-E128 GEMM 1 tile) beside the two it replaced.
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
step moe 200 python3 agent/studies/measure_baselines.py --ops fused_moe \
  --only seed:decode_gemm1_joint,seed:pdl_off --rounds 5 --rounds-max-us 300 --out /tmp/res/moe/out/report.md
step bounds 120 python3 -m agent.studies.copy_floor --ops gemm,fused_moe --max-t 256 --read \
  --out /tmp/res/bounds/bounds.json
touch /tmp/res/all.done
