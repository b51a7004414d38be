# Session 26's second batch (2026-12-06): the operators whose seed lost a hot shape to a baseline in the first
# batch's single timings (session26.sh), in 9 paired rounds through measure_baselines (which now checks every
# operator form: tuples, in-place writes, invariants), with l2_norm's small-program variants (min_programs) and
# reshape_and_cache (in place) as the GPU check of the new contract-based check. Carry .whl (Liger).
cd "$(dirname "$0")/../../.."
source agent/studies/batch/steps.sh
batch_begin
mkdir -p /tmp/site && pip install -q --no-deps --target /tmp/site .whl/liger_kernel-*.whl > /tmp/res/pip.txt 2>&1
PYTHONPATH=/tmp/site:$PWD step rounds 540 python3 agent/studies/measure_baselines.py \
  --ops l2_norm,fused_add_rms_norm,rotary_embedding,gated_rms_norm,layer_norm,per_token_group_quant_fp8,reshape_and_cache \
  --only eager,compile,liger,seed:min_p528,seed:min_p528_rows4_w1,seed:min_p132 --rounds 9 --rounds-max-us 10 \
  --max-minutes 7 --out /tmp/res/rounds/out/suite_rounds.md
touch /tmp/res/all.done
