# Session 23's third batch (2026-12-06): fused_moe as committed (PDL on, the T256-E128 GEMM 1 tile) through its GPU
# tests and the sandbox, and whether `aka optimize` finds the tile by itself.
#   checks    the fused_moe GPU tests and PDL's same-bits test for fused_moe (PDL is now on by default)
#   optimize  aka optimize, offline search, from the seed before this session (.diag/s23/fused_moe_before.py:
#             `git show 528e32e:benchmarks/operators/fused_moe/seed.py`) on T256-H4096-I192-E128-k8 alone
#             (agent/studies/batch/shapes/fused_moe_t256_e128.yaml), 3 GPU-minutes; carry .diag/s23
#   bench     aka bench fused_moe on its hot set through the sandbox (the verdict's S_i, compile-ahead, PDL)
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
step checks 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/benchmarks/test_op_fused_moe.py \
  tests/benchmarks/test_pdl_seeds.py -k "fused_moe"
step optimize 330 bash -c "python3 -m agent.cli_optimize --op fused_moe \
  --shapes agent/studies/batch/shapes/fused_moe_t256_e128.yaml --seed-kernel .diag/s23/fused_moe_before.py \
  --proposer search --gpu-minutes 3 --samples 2 --baselines none \
  -c home=/tmp/res/optimize/home -c knowledge.enabled=false; \
  python3 -m agent.studies.run_report /tmp/res/optimize/home/audit.db --json /tmp/res/optimize/report.json"
step bench 200 python3 -m agent.cli bench --op fused_moe --shape-set hot --json /tmp/res/bench/fused_moe.json \
  -c home=/tmp/res/bench/home
touch /tmp/res/all.done
