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
