#!/bin/bash
# ab.sh SECONDS EPOCH_STEPS: one churning job, old and new gpusample attached at once
cd /work/wt-i42
/usr/bin/python3 tests/workloads/train_torch.py --seconds $(( $1 + 25 )) --workers 2 --epoch-steps $2 > /tmp/i42/ab-job.out 2>&1 &
JOB=$!; sleep 4
/tmp/i42/old/build/gpusample -p $JOB -d $1 -o /tmp/i42/ab-old > /tmp/i42/ab-old.rep 2> /tmp/i42/ab-old.err &
O=$!
build/gpusample -p $JOB -d $1 -o /tmp/i42/ab-new > /tmp/i42/ab-new.rep 2> /tmp/i42/ab-new.err &
N=$!
sleep 2
/tmp/i42/rss.sh $O 10 > /tmp/i42/ab-old.rss &
/tmp/i42/rss.sh $N 10 > /tmp/i42/ab-new.rss &
wait $JOB
paste /tmp/i42/ab-old.rss /tmp/i42/ab-new.rss
