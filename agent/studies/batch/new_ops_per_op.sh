# usage (on the device, repository root): bash agent/studies/batch/new_ops_per_op.sh OP,OP,...
# measure_new_ops for each operator as committed, every hot shape, in its own process and folder under
# $OUT/suite: a timeout or a lost machine loses one operator only. Needs the liger wheel in .whl (carry it).
export PYTHONPATH=/tmp/site:$PWD
[ -d /tmp/site/liger_kernel ] || pip install -q --no-deps --target /tmp/site .whl/liger*.whl >/dev/null 2>&1
mkdir -p $OUT/suite
for op in ${1//,/ }; do
  t0=$(date +%s)
  timeout 240 python -m agent.studies.measure_new_ops --out $OUT/suite/$op --ops $op --max-shapes 0 --jobs 14 > $OUT/suite/$op.log 2>&1
  echo "$op rc $? $(( $(date +%s) - t0 )) s $(grep -m1 'median seed attainment' $OUT/suite/$op/new_ops.md 2>/dev/null)"
done
