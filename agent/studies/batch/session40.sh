# Session 40's batch (written 2026-12-07 in session 40): on an H200, the whole suite beside its baselines afresh
# (benchmarks/results/h200.md is session 26's, and per_token_quant_fp8, per_token_group_quant_fp8, reshape_and_cache,
# softmax and rms_norm_quant_fp8 changed since on an H100's timings), then the floor study session 39 wrote and no
# machine ran, cut to its four most telling cases and two searches. Carry .whl (Liger). About 10 minutes for the
# suite on an H200, 8 for the rest on either card; one command:
#   rm -rf /tmp/repo /tmp/res && cp -a . /tmp/repo && cd /tmp/repo && \
#     (setsid nohup bash agent/studies/batch/session40.sh > /tmp/bg.log 2>&1 < /dev/null &); \
#     sleep 2; bash agent/studies/batch/collect.sh 540
#   suite_a, suite_b, suite_c  (an H200 only) agent/studies/measure_baselines.py, the three runs h200.md merges
#                  (session 26's groups), every seed as committed beside eager, compile and Liger; paired rounds on
#                  shapes up to 10 us
#   copies         (an H200 only) agent/studies/copy_floor.py: a device copy of each decode shape's bytes beside the
#                  floor, for every operator of issue 15 (how near the floor any kernel can get; session 10 had silu's
#                  and rms_norm's only)
#   floors_<what>, search_<how>  session39.sh's steps of the same names: quiet, tick (GPU work of other contexts
#                  without start-ups), all (the spares' whole start-up) and ctx (the context only); the search as
#                  committed and with the spares starting only their context
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || BATCH_SKIP="$BATCH_SKIP suite_a suite_b suite_c copies"
batch_begin
mkdir -p /tmp/site && pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
suite() {    # suite NAME ROUNDS OPS: one measure_baselines run into /tmp/res/NAME/out
  PYTHONPATH=/tmp/site:$PWD step $1 300 python3 agent/studies/measure_baselines.py --ops $3 --no-variants \
    --rounds $2 --rounds-max-us 10 --max-minutes 4.5 --out /tmp/res/$1/out/$1.md
}
suite suite_a 9 l2_norm,fused_add_rms_norm,rotary_embedding,gated_rms_norm,layer_norm,per_token_group_quant_fp8,reshape_and_cache
suite suite_b 5 rms_norm,silu_and_mul,gemm,softmax,rms_norm_quant_fp8,causal_conv1d_update,moe_align_block_size,top_k_top_p_filter,fused_moe
suite suite_c 5 moe_topk_softmax,moe_sum_reduce,causal_conv1d,per_token_quant_fp8,qk_rms_norm
step copies 90 python3 -m agent.studies.copy_floor --out /tmp/res/copies/copy_floor.json --max-t 100000000 \
  --ops causal_conv1d,causal_conv1d_update,fused_add_rms_norm,gated_rms_norm,l2_norm,layer_norm,moe_align_block_size,moe_sum_reduce,moe_topk_softmax,per_token_group_quant_fp8,per_token_quant_fp8,qk_rms_norm,reshape_and_cache,rms_norm,rms_norm_quant_fp8,rotary_embedding,silu_and_mul,softmax,top_k_top_p_filter
floors() {   # floors NAME ARGS...: one floor study into /tmp/res/floors_NAME
  local name=$1; shift
  step floors_$name 120 python3 -m agent.studies.floor_spread --processes 4 --repeats 20 "$@" \
    --out /tmp/res/floors_$name/floors.json
}
floors quiet
floors tick --gpu-tick 3
floors all --spares 3
floors ctx --spares 3 --spare-stages ""
search() {   # search NAME [-c ...]: one search into /tmp/res/search_NAME
  local name=$1 d=/tmp/res/search_$1; shift
  step search_$name 150 bash -c "python3 -m agent.cli_optimize --op rms_norm_quant_fp8 \
    --shape-set hot --proposer search --gpu-minutes 1 --minutes 1.8 --samples 2 --baselines eager,compile \
    -c knowledge.enabled=false -c home=$d/home $*; python3 -m agent.studies.run_report $d/home/audit.db \
    --json $d/report.json; python3 -m agent.studies.run_floors $d/home/audit.db"
}
search off
search ctx -c sandbox.gpu_warm_stages=[]
touch /tmp/res/all.done
