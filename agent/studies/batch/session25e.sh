# Session 25's last batch (2026-12-06): top_k_top_p_filter as committed (bins of 1/4, the reads' prefetch, tight
# bounds, rows of up to 2048 undecided entries sorted, the search on 16 warps): GPU tests, the search launch
# replayed over subsets of its rows, every hot shape beside the seed as it was before this session and each
# setting of this batch undone.
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
step checks 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/benchmarks/test_op_top_k_top_p_filter.py \
  tests/benchmarks/test_pdl_seeds.py -k "top_k or bins"
step probe 60 python3 -m agent.studies.topk_search_probe --shape B256-V151936 --out /tmp/res/probe/probe.json
step topk 200 env OUT=/tmp/res/topk/out OP_TIMEOUT_S=195 bash agent/studies/batch/new_ops_per_op.sh \
  top_k_top_p_filter --variants --only-variants bins_before_s25,bins_sort_off,bins_search_w8,bins_sort4096,bins_search_ways32
touch /tmp/res/all.done
