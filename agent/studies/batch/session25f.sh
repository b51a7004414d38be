# Session 25's sixth batch (2026-12-06): whether `aka optimize` (offline search) finds this session's top_k gains
# by itself, from the seed with session 24's settings and this session's switches off (.diag/s25/top_k_before.py:
# the committed seed with BIN_SCALE 8, BIN_COUNT 256, BIN_PREFETCH 0, BIN_TIGHT 0, BIN_SORT_MAX 0 and the search
# on 8 warps; carry .diag/s25), on B256-V151936 alone, 3 GPU-minutes.
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
step optimize 250 bash -c "python3 -m agent.cli_optimize --op top_k_top_p_filter \
  --shapes agent/studies/batch/shapes/top_k_b256.yaml --seed-kernel .diag/s25/top_k_before.py \
  --proposer search --gpu-minutes 3 --samples 2 --baselines none \
  -c home=/tmp/res/optimize/home -c knowledge.enabled=false; \
  python3 -m agent.studies.run_report /tmp/res/optimize/home/audit.db --json /tmp/res/optimize/report.json"
touch /tmp/res/all.done
