# Sourced by the batch scripts: step NAME TIMEOUT COMMAND... runs one study under `timeout`, its output in
# /tmp/res/NAME/log, then archives /tmp/res/NAME.tgz and marks /tmp/res/NAME.done for collect.sh.
# BATCH_SKIP="NAME ..." leaves those steps out (a batch rerun on another card, or after a call that ran some).
# BATCH_RES moves /tmp/res (the tests' own folder; collect.sh and the batches' commands read /tmp/res).
step() {
  local name=$1 limit=$2 res=${BATCH_RES:-/tmp/res}; shift 2
  mkdir -p $res
  case " $BATCH_SKIP " in *" $name "*) echo "$name skipped" >> $res/steps.txt; return 0;; esac
  local t0=$(date +%s)
  mkdir -p $res/$name
  timeout -s TERM $limit "$@" > $res/$name/log 2>&1
  echo "$name rc=$? $(( $(date +%s)-t0 ))s" >> $res/steps.txt
  tar czf $res/$name.tgz -C $res $name
  touch $res/$name.done
}

# batch_begin: what every batch does first (its steps' output folder, the repo as PYTHONPATH, the GPU's name and
# clocks in /tmp/res/gpu.txt); call it after cd-ing to the repository root.
batch_begin() {
  export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
  mkdir -p /tmp/res
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > /tmp/res/gpu.txt
}
