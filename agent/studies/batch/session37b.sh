# Session 37's second batch: `aka optimize --proposer search` with every score on the run's pinned floor (session
# 36's fix) on four operators whose median attainment sits 0.02-0.06 under issue 15's 0.6 (h200.md): rotary's T16
# and T64, moe_topk_softmax's T64 and T256, layer_norm's and per_token_quant_fp8's decode shapes. Session 36 searched
# rotary, moe_topk_softmax and layer_norm before the fix, when 21% of screen verdicts were the floor's. Any card;
# about 10 minutes. Carry .whl (Liger: the searches time no Liger baseline, the report's suite lines may).
#   rm -rf /tmp/repo /tmp/res && cp -a . /tmp/repo && cd /tmp/repo && \
#     (setsid nohup bash agent/studies/batch/session37b.sh > /tmp/bg.log 2>&1 < /dev/null &); \
#     sleep 2; bash agent/studies/batch/collect.sh 540
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
for op in rotary_embedding moe_topk_softmax layer_norm per_token_quant_fp8; do
  step search3_$op 170 bash -c "python3 -m agent.cli_optimize --op $op --shape-set hot --proposer search \
    --gpu-minutes 1.5 --minutes 2.3 --samples 2 --baselines eager,compile -c knowledge.enabled=false \
    -c home=/tmp/res/search3_$op/home; h=/tmp/res/search3_$op/home/audit.db; \
    python3 -m agent.studies.run_report \$h --json /tmp/res/search3_$op/report.json; \
    python3 -m agent.studies.run_floors \$h; python3 -m agent.studies.rescreen \$h"
done
touch /tmp/res/all.done
