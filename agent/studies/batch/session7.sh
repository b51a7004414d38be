# The batch of 2026-12-01 (session 7), as run: steps one after another in their own process session (see README.md),
# in the order of what issue 9 still needs: the evaluation breakdown after this session's changes, a 5-GPU-minute
# silu_and_mul run (candidates per GPU-minute), the fused_moe recovery, a 5-GPU-minute gemm run.
export PYTHONUNBUFFERED=1
mkdir -p /tmp/res
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD
source agent/studies/batch/steps.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > /tmp/res/gpu.txt
step checks 120 python3 -m pytest -q -p no:cacheprovider tests/sandbox/test_correctness.py -k checksum tests/sandbox/test_output_slot.py
step bd 330 python3 sandbox/studies/eval_breakdown.py --out /tmp/res/bd/out --ops gemm,fused_moe -n 2 --per-shape --seeded-candidate
AKA_HOME=/tmp/res/opt_silu/home step opt_silu 420 python3 -m agent.cli optimize --op silu_and_mul --shape-set hot --gpu-minutes 5 --iterations 400
step rec_moe 600 python3 -m agent.studies.recovery --op fused_moe --gpu-minutes 5 --samples 2 --out /tmp/res/rec_moe/out
AKA_HOME=/tmp/res/opt_gemm/home step opt_gemm 420 python3 -m agent.cli optimize --op gemm --shape-set hot --gpu-minutes 5 --iterations 400
touch /tmp/res/all.done
