# Session 35's batch (written 2026-12-07): session 33's steps (none of them has run on an H200 yet), after one new
# step that any card can run. Carry .whl (Liger). About 27 minutes: three calls of collect.sh.
#   quant_warps     per_token_quant_fp8's and per_token_group_quant_fp8's seeds beside the tables they replaced in
#                   session 35 (`h8192_w16`, `b16k_g4_w4`), every hot shape, 9 paired rounds up to 30 us (no baseline:
#                   h200.md has them). On an H100 the new ones took 0.92-0.97 of the time at T = 16-256 (H = 7168);
#                   on an H200, keep each only if no hot shape is slower. (Session 35 ran this step on an H100 with
#                   the sweep that chose them, in 35 s: its command is in benchmarks/results/session35_h100.md.)
# Then session33.sh's steps, as it describes them:
#   softmax_h200    softmax's seed (STORE_CS 1, REVERSE 0 since session 32, from an H100's paired rounds) beside
#                   `seed:before_s32` (the pair before) and torch.compile on all seven hot shapes, 5 paired rounds:
#                   the seed keeps the pair only if the H200 agrees (T = 64 faster, no hot shape slower)
#   conv            causal_conv1d_update beside its baselines (9 paired rounds), for h200.md (H200 only)
#   copies          the copy bound of every hot shape on the H200 (sessions 26 and 29 ran it on H100s)
#   gpu_sandbox     the gpu-marked tests of tests/sandbox and tests/agent, Liger importable (session 32's run on an
#                   H100 ran out of its 290 s: Liger's five GPU tests failed there for want of the package, since
#                   fixed to skip with the reason, and no other test failed before the limit). A limit of 540 s
#                   since session 34: on an H100 they took 455 s, and its limit of 420 s cut one test short
#   gpu_benchmarks  the gpu-marked tests of tests/benchmarks (90 s in session 32 did not finish)
#   moe_liger       fused_moe beside Liger-Kernel 0.8.5's fused MoE, last: Liger's first call autotunes 32-40 configs
#                   a GEMM (session 31's 300 s ran out in it on an H100)
# conv and copies go to h200.md only from an H200 (BATCH_SKIP="softmax_h200 conv copies" on another card).
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
mkdir -p /tmp/site && pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
PYTHONPATH=/tmp/site:$PWD step quant_warps 200 python3 agent/studies/measure_baselines.py \
  --ops per_token_quant_fp8,per_token_group_quant_fp8 --rounds 9 --rounds-max-us 30 \
  --only seed:h8192_w16,seed:b16k_g4_w4 --out /tmp/res/quant_warps/out/quant_warps.md
PYTHONPATH=/tmp/site:$PWD step softmax_h200 240 python3 agent/studies/measure_baselines.py --ops softmax \
  --only compile,seed:before_s32 --rounds 5 --rounds-max-us 100 --out /tmp/res/softmax_h200/out/softmax_h200.md
PYTHONPATH=/tmp/site:$PWD step conv 120 python3 agent/studies/measure_baselines.py --ops causal_conv1d_update \
  --no-variants --rounds 9 --rounds-max-us 10 --out /tmp/res/conv/out/conv.md
step copies 90 python3 -m agent.studies.copy_floor --out /tmp/res/copies/copy_floor.json --max-t 100000000 \
  --ops causal_conv1d,causal_conv1d_update,fused_add_rms_norm,gated_rms_norm,l2_norm,layer_norm,moe_align_block_size,moe_sum_reduce,moe_topk_softmax,per_token_group_quant_fp8,per_token_quant_fp8,qk_rms_norm,reshape_and_cache,rms_norm,rms_norm_quant_fp8,rotary_embedding,silu_and_mul,softmax,top_k_top_p_filter
PYTHONPATH=/tmp/site:$PWD step gpu_sandbox 540 python3 -m pytest -v -m gpu -p no:cacheprovider \
  --durations 15 -rfE tests/sandbox tests/agent
PYTHONPATH=/tmp/site:$PWD step gpu_benchmarks 360 python3 -m pytest -v -m gpu -p no:cacheprovider \
  --durations 15 -rfE tests/benchmarks
PYTHONPATH=/tmp/site:$PWD step moe_liger 540 python3 agent/studies/measure_baselines.py --ops fused_moe \
  --only liger --slow-baselines --no-variants --out /tmp/res/moe_liger/out/moe_liger.md
touch /tmp/res/all.done
