# usage (on the device, repository root): bash agent/studies/batch/new_ops_per_op.sh OP,OP,... [--variants [--only-variants V,...]]
# measure_new_ops for each operator, every hot shape, in its own process and folder under $OUT/suite (with
# --variants also the seed's variants): a timeout or a lost machine loses one operator only. Liger is timed
# where its wheel is in .whl (carry it); without it the Liger column reads "absent".
export PYTHONPATH=/tmp/site:$PWD
ls .whl/liger*.whl >/dev/null 2>&1 && { [ -d /tmp/site/liger_kernel ] || pip install -q --no-deps --target /tmp/site .whl/liger*.whl >/dev/null 2>&1; }
mkdir -p $OUT/suite
for op in ${1//,/ }; do
  t0=$(date +%s)
  timeout ${OP_TIMEOUT_S:-240} python -m agent.studies.measure_new_ops --out $OUT/suite/$op --ops $op --max-shapes 0 --jobs 14 "${@:2}" > $OUT/suite/$op.log 2>&1
  echo "$op rc $? $(( $(date +%s) - t0 )) s $(grep -m1 'median seed attainment' $OUT/suite/$op/new_ops.md 2>/dev/null)"
done
