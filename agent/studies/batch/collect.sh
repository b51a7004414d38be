# Wait (at most $1 s) for the background driver, then copy finished steps (not yet copied) to $OUT, and a
# snapshot of the step still running (NAME.partial.tgz: its log and audit trail so far), so that a machine
# taken away between two polls (session 9 lost one mid-study) loses at most what ran after the last poll.
limit=${1:-560}; t0=$(date +%s)
while [ $(( $(date +%s)-t0 )) -lt $limit ] && [ ! -e /tmp/res/all.done ]; do sleep 5; done
cat /tmp/res/gpu.txt /tmp/res/steps.txt 2>/dev/null
for f in /tmp/res/*.done; do
  [ -e "$f" ] || continue          # no step done yet: the glob stayed a pattern
  n=$(basename $f .done); [ "$n" = all ] && continue
  [ -e /tmp/res/$n.copied ] && continue
  cp /tmp/res/$n.tgz $OUT/ && touch /tmp/res/$n.copied
done
for d in /tmp/res/*/; do
  n=$(basename $d); [ -e /tmp/res/$n.done ] && continue
  tar czf $OUT/$n.partial.tgz -C /tmp/res $n 2>/dev/null
done
ls $OUT
for n in $(ls /tmp/res | grep -v "\." ); do [ -e /tmp/res/$n/log ] && { echo "== $n"; tail -4 /tmp/res/$n/log; }; done
