# Session 32's batch (written 2026-12-06 in session 31): what session 31 left for a GPU, most decisive first.
# Carry .whl (Liger). About 23 minutes: three calls of collect.sh.
#   softmax_search  softmax's seed beside `seed:search_s31` (the switches `aka optimize` accepted at T = 64 on an
#                   H100 in session 31) and torch.compile on all seven hot shapes, 5 paired rounds: adopt it only
#                   where the H200 agrees on every shape (T = 2 and T = 256 run other paths' settings too)
#   conv            causal_conv1d_update beside its baselines (9 paired rounds), for h200.md (H200 only)
#   copies          the copy bound of every hot shape on the H200 (sessions 26 and 29 ran it on H100s)
#   optimize_topk   `aka optimize` on top_k_top_p_filter at B = 256, 4 GPU-minutes: session 31's 200 s step ended
#                   after 2 iterations (the seed's evaluation alone took 81 GPU-s)
#   moe_liger       fused_moe beside Liger-Kernel 0.8.5's fused MoE: session 31's 300 s went to the autotuning of
#                   Liger's first call (32-40 configs per GEMM); 540 s here, last, so nothing waits on it
# conv and copies go to h200.md only from an H200 (BATCH_SKIP="conv copies" on another card).
# Ran 2026-12-07 (session 32) on an H100 with BATCH_SKIP="conv copies": softmax_search (44 s) and optimize_topk
# (its 400 s limit) finished; moe_liger was stopped for the GPU tests. The softmax seed then took search_s31's
# pair (the variant is before_s32 now). Not run: conv and copies (H200 only).
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
mkdir -p /tmp/site && pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
PYTHONPATH=/tmp/site:$PWD step softmax_search 240 python3 agent/studies/measure_baselines.py --ops softmax \
  --only compile,seed:search_s31 --rounds 5 --rounds-max-us 100 --out /tmp/res/softmax_search/out/softmax_search.md
PYTHONPATH=/tmp/site:$PWD step conv 120 python3 agent/studies/measure_baselines.py --ops causal_conv1d_update \
  --no-variants --rounds 9 --rounds-max-us 10 --out /tmp/res/conv/out/conv.md
step copies 90 python3 -m agent.studies.copy_floor --out /tmp/res/copies/copy_floor.json --max-t 100000000 \
  --ops causal_conv1d,causal_conv1d_update,fused_add_rms_norm,gated_rms_norm,l2_norm,layer_norm,moe_align_block_size,moe_sum_reduce,moe_topk_softmax,per_token_group_quant_fp8,per_token_quant_fp8,qk_rms_norm,reshape_and_cache,rms_norm,rms_norm_quant_fp8,rotary_embedding,silu_and_mul,softmax,top_k_top_p_filter
step optimize_topk 400 bash -c "python3 -m agent.cli_optimize --op top_k_top_p_filter \
  --shapes agent/studies/batch/shapes/top_k_b256.yaml --proposer search --gpu-minutes 4 --samples 2 \
  --baselines none -c home=/tmp/res/optimize_topk/home -c knowledge.enabled=false; \
  python3 -m agent.studies.run_report /tmp/res/optimize_topk/home/audit.db --json /tmp/res/optimize_topk/report.json"
PYTHONPATH=/tmp/site:$PWD step moe_liger 540 python3 agent/studies/measure_baselines.py --ops fused_moe \
  --only liger --slow-baselines --no-variants --out /tmp/res/moe_liger/out/moe_liger.md
touch /tmp/res/all.done
