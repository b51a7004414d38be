# Session 24's batch (2026-12-06): top_k_top_p_filter's bins path (two reads and one write, 4 launches) on the GPU:
# its GPU tests (the key search's bytes, spilled rows, hand rows, graph replay; PDL's bytes), then every hot shape
# beside the key-search paths it replaced (variant search_paths) and its own settings, in one process.
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
step checks 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/benchmarks/test_op_top_k_top_p_filter.py \
  tests/benchmarks/test_pdl_seeds.py -k "top_k or bins"
step topk 300 env OUT=/tmp/res/topk/out OP_TIMEOUT_S=280 bash agent/studies/batch/new_ops_per_op.sh \
  top_k_top_p_filter --variants
touch /tmp/res/all.done
