# The batch of 2026-12-01 (session 6), as run: steps run one after another in their own process session, each writing
# /tmp/res/<step>.tgz when done; the device calls copy what is finished to $OUT.
export PYTHONUNBUFFERED=1
mkdir -p /tmp/res
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/res/pip.log 2>&1
source agent/studies/batch/steps.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > /tmp/res/gpu.txt
step rec_silu 450 python3 -m agent.studies.recovery --op silu_and_mul --gpu-minutes 4.5 --samples 2 --out /tmp/res/rec_silu/out
PYTHONPATH=/tmp/site:$PWD step llm 200 python3 -m agent.studies.llm_path --op rms_norm --out /tmp/res/llm/out --timeout-s 190
step rec_moe 540 python3 -m agent.studies.recovery --op fused_moe --gpu-minutes 4.5 --samples 2 --out /tmp/res/rec_moe/out
AKA_HOME=/tmp/res/opt_rms/home step opt_rms 260 python3 -m agent.cli optimize --op rms_norm --shape-set hot --gpu-minutes 3 --iterations 400
touch /tmp/res/all.done
