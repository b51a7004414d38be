# Session 24's second batch (2026-12-06): where top_k_top_p_filter's bins path spends its time (per-kernel device
# times at B = 256, 64 and 2), and its bins as coarse as 1/4 and 1 logit unit beside the seed's 1/16. (Its variant
# names bins_coarse, bins_nb128, bins_nb64, bins_nb32 and bins_ways8 were retired after this run: the bins of 1/8
# over 32 units became the seed, 1/4 over 16 is bins_window16.)
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
step ktimes 150 python3 -m agent.studies.kernel_times --op top_k_top_p_filter \
  --shapes B256-V151936,B64-V151936,B2-V151936 --variants search_paths,bins_coarse,bins_nb128,bins_nb64,bins_nb32,bins_ways8 \
  --out /tmp/res/ktimes/out
step topk 240 env OUT=/tmp/res/topk/out OP_TIMEOUT_S=220 bash agent/studies/batch/new_ops_per_op.sh \
  top_k_top_p_filter --variants --only-variants bins_coarse,bins_nb128,bins_nb64,bins_nb32,bins_ways8
touch /tmp/res/all.done
