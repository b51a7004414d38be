# Session 25's first batch (2026-12-06): top_k_top_p_filter's two reads with the next tile loaded ahead
# (BIN_PREFETCH) and with coarser bins over the same 32 units (bins_quarter, bins_half): their bytes against the
# key searches, Nsight counters of every kernel at B = 256, and every hot shape beside the seed, with the fp32
# baseline (eager and torch.compile) timed for the first time.
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
step checks 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/benchmarks/test_op_top_k_top_p_filter.py \
  -k "bins_path_gives"
step counters 200 python3 -m agent.studies.variant_counters --op top_k_top_p_filter --shapes B256-V151936 \
  --variants seed,bins_prefetch,bins_quarter,bins_quarter_prefetch --out /tmp/res/counters/counters.json \
  --timeout-s 60
step topk 240 env OUT=/tmp/res/topk/out OP_TIMEOUT_S=235 bash agent/studies/batch/new_ops_per_op.sh \
  top_k_top_p_filter --variants --only-variants bins_prefetch,bins_quarter,bins_half,bins_quarter_prefetch
touch /tmp/res/all.done
