#!/usr/bin/env bash
for v in 1 3; do timeout 20 .devcarry/probe/cuda_confine_probe only $v || echo "variant $v: rc $?"; done
OUT=$OUT bash tools/dev/gpu-judge-smoke
