# Session 24's third batch (2026-12-06): top_k_top_p_filter's bins path with bins of 1/8 a unit over 32 units and
# its undecided entries sorted in registers (up to 1024 a row): GPU tests, per-kernel times with PDL off (PDL's
# early start folds each kernel's wait into its time), every hot shape beside the key-search paths and its settings.
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
step checks 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/benchmarks/test_op_top_k_top_p_filter.py \
  tests/benchmarks/test_pdl_seeds.py -k "top_k or bins"
step ktimes 100 python3 -m agent.studies.kernel_times --op top_k_top_p_filter \
  --shapes B256-V151936,B64-V151936,B2-V151936 --variants bins_pdl_off --out /tmp/res/ktimes/out
step topk 240 env OUT=/tmp/res/topk/out OP_TIMEOUT_S=230 bash agent/studies/batch/new_ops_per_op.sh \
  top_k_top_p_filter --variants
touch /tmp/res/all.done
