# Session 24's fifth batch (2026-12-06): top_k_top_p_filter with the write pass's scan skipped on tiles without
# undecided entries and decide merging 32 chunks a step, beside each change undone and the key-search paths (the
# implementations are checked against the reference before they are timed; the GPU tests ran in session24d.sh).
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
step topk 120 env OUT=/tmp/res/topk/out OP_TIMEOUT_S=115 bash agent/studies/batch/new_ops_per_op.sh \
  top_k_top_p_filter --variants --only-variants search_paths,bins_scan_every_tile,bins_red8
touch /tmp/res/all.done
