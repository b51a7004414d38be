# Session 23's second batch (2026-12-06): fused_moe's new T256-E128 GEMM 1 tile checked and timed beside the tile it
# replaced and the two untimed switches, then the read-only bound again on this call's card; on an H200 also
# session23.sh's first step (session 22's H100-chosen defaults beside the ones they replaced).
#   checks   the fused_moe GPU tests (bits, graph capture, the sandbox) with the committed table
#   moe      measure_baselines fused_moe: the seed, decode_gemm1_joint (the tile before), pdl, align_atomic_2048;
#            5 interleaved rounds of each shape whose seed takes at most 300 us (the E = 128 decode shapes)
#   bounds   as session23b.sh
#   defaults (H200 only) session23.sh's step of that name
#   counters ncu of every kernel of the call at T256-E128 and T16-E128, the seed beside the tile it replaced
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
step checks 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/benchmarks/test_op_fused_moe.py
step moe 330 python3 agent/studies/measure_baselines.py --ops fused_moe \
  --only seed:decode_gemm1_joint,seed:pdl,seed:align_atomic_2048 --rounds 5 --rounds-max-us 300 \
  --out /tmp/res/moe/out/report.md
step bounds 150 python3 -m agent.studies.copy_floor --ops gemm,fused_moe --max-t 256 --read \
  --out /tmp/res/bounds/bounds.json
if grep -q H200 /tmp/res/gpu.txt; then
  pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
  step defaults 480 env OUT=/tmp/res/defaults/out OP_TIMEOUT_S=200 bash agent/studies/batch/new_ops_per_op.sh \
    softmax,moe_align_block_size,top_k_top_p_filter --variants
fi
step counters 330 python3 -m agent.studies.variant_counters --op fused_moe \
  --shapes T256-H4096-I192-E128-k8,T16-H4096-I192-E128-k8 --variants seed,decode_gemm1_joint \
  --out /tmp/res/counters/counters.json --timeout-s 150
touch /tmp/res/all.done
