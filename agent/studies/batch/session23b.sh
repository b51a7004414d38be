# Session 23's own batch (2026-12-06): how close issue 12's weight-streaming targets can come at all, and the
# decode tiles of fused_moe's two grouped GEMMs searched one at a time (the exhaustive table gave both one tile).
#   bounds   copy_floor --read: each decode shape of gemm (M <= 256) and fused_moe (T <= 256) streamed read-only,
#            its Q bytes, with the score's timer: the least time any kernel that reads them can take
#   moe_g2   config_sweep fused_moe_gemm2: GEMM 2's tile in every decode bucket, on the six decode shapes
#   moe_g1   config_sweep fused_moe_gemm1: the same for GEMM 1
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
MOE_DECODE=T256-H7168-I256-E256-k8,T64-H7168-I256-E256-k8,T16-H7168-I256-E256-k8,T256-H4096-I192-E128-k8,T64-H4096-I192-E128-k8,T16-H4096-I192-E128-k8
step bounds 150 python3 -m agent.studies.copy_floor --ops gemm,fused_moe --max-t 256 --read \
  --out /tmp/res/bounds/bounds.json
step moe_g2 330 python3 agent/studies/config_sweep.py --op fused_moe_gemm2 --shapes $MOE_DECODE --top 6 \
  --json /tmp/res/moe_g2/sweep.json
step moe_g1 330 python3 agent/studies/config_sweep.py --op fused_moe_gemm1 --shapes $MOE_DECODE --top 6 \
  --json /tmp/res/moe_g1/sweep.json
touch /tmp/res/all.done
