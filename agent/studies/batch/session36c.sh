# Session 36's third call (written 2026-12-07 after the run-floor fix, agent/run_floor.py): the searches again,
# every score of a run now against one latency floor. Session 36's first searches compared each screen's score,
# computed with the floor its own process read (0.98-1.66 us), with the incumbent's (1.66 us in the
# rms_norm_quant_fp8 run): 65 of 66 candidates were screened out there, 16 warps among them (faster on every
# shape). About 5.5 minutes of an H100 or H200; carry nothing. One call:
#   (setsid nohup bash agent/studies/batch/session36c.sh > /tmp/bg.log 2>&1 < /dev/null &); sleep 2; \
#     bash agent/studies/batch/collect.sh 330
#   search2_<op>  `aka optimize --proposer search`, 1.5 GPU-minutes (2.2 wall), from the committed seed
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
for op in rms_norm_quant_fp8 per_token_group_quant_fp8; do
  step search2_$op 160 bash -c "python3 -m agent.cli_optimize --op $op --shape-set hot --proposer search \
    --gpu-minutes 1.5 --minutes 2.2 --samples 2 --baselines none -c knowledge.enabled=false \
    -c home=/tmp/res/search2_$op/home; \
    python3 -m agent.studies.run_report /tmp/res/search2_$op/home/audit.db --json /tmp/res/search2_$op/report.json"
done
touch /tmp/res/all.done
