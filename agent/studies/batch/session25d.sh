# Session 25's fourth batch (2026-12-06): where top_k_top_p_filter's search kernel spends its time (the launch
# replayed over subsets of its rows), and every hot shape with the search on 16 warps (no spills under triton 3.6).
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
step probe 150 python3 -m agent.studies.topk_search_probe --shape B256-V151936 \
  --variants bins_eighth,bins_search_w16,bins_sort2048 --out /tmp/res/probe/probe.json
step topk 200 env OUT=/tmp/res/topk/out OP_TIMEOUT_S=195 bash agent/studies/batch/new_ops_per_op.sh \
  top_k_top_p_filter --variants --only-variants bins_before_s25,bins_eighth,bins_search_w16,bins_sort2048
touch /tmp/res/all.done
