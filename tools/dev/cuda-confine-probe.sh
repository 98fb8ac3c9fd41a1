#!/usr/bin/env bash
# Diagnostic: strace of probe variant 1 (full runner confinement) around cuInit.
P=.devcarry/probe
pid=$(timeout 10 $P/cuda_confine_probe stop 1 $OUT/v1.txt)
sleep 0.3
LD_LIBRARY_PATH=$P timeout 20 $P/strace -f -o $OUT/strace1.txt -p $pid &
sleep 0.7; kill -CONT $pid; sleep 6; kill -9 $pid 2>/dev/null; wait
cat $OUT/v1.txt
grep -n -E "EACCES|EPERM|ENOSYS|ENOENT \(|socket|connect|bind" $OUT/strace1.txt | grep -v "\.so\|libm" | tail -30
