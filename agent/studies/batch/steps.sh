# Sourced by the batch scripts: step NAME TIMEOUT COMMAND... runs one study under `timeout`, its output in
# /tmp/res/NAME/log, then archives /tmp/res/NAME.tgz and marks /tmp/res/NAME.done for collect.sh.
step() {
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  mkdir -p /tmp/res/$name
  timeout -s TERM $limit "$@" > /tmp/res/$name/log 2>&1
  echo "$name rc=$? $(( $(date +%s)-t0 ))s" >> /tmp/res/steps.txt
  tar czf /tmp/res/$name.tgz -C /tmp/res $name
  touch /tmp/res/$name.done
}

# batch_begin: what every batch does first (its steps' output folder, the repo as PYTHONPATH, the GPU's name and
# clocks in /tmp/res/gpu.txt); call it after cd-ing to the repository root.
batch_begin() {
  export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
  mkdir -p /tmp/res
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > /tmp/res/gpu.txt
}
