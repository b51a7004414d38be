# Session 25's third batch (2026-12-06): top_k_top_p_filter with decide's tight bounds (BIN_TIGHT, fewer undecided
# entries where top-k is off): GPU tests, Nsight counters of every kernel at B = 256 beside bins of 1/8 and a second
# sort of 2048, every hot shape beside the seed as it was before this session and each change undone.
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
step checks 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/benchmarks/test_op_top_k_top_p_filter.py \
  tests/benchmarks/test_pdl_seeds.py -k "top_k or bins"
step counters 200 python3 -m agent.studies.variant_counters --op top_k_top_p_filter --shapes B256-V151936 \
  --variants seed,bins_eighth,bins_sort2048 --out /tmp/res/counters/counters.json --timeout-s 60
step topk 240 env OUT=/tmp/res/topk/out OP_TIMEOUT_S=235 bash agent/studies/batch/new_ops_per_op.sh \
  top_k_top_p_filter --variants --only-variants bins_before_s25,bins_loose,bins_eighth,bins_sort2048
touch /tmp/res/all.done
