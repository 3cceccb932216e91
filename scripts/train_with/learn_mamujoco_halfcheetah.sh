#!/usr/bin/env bash
# Issue 37's learning check: BenchMARL's own MAPPO (Experiment.run, unchanged) on MaMuJoCo
# HalfCheetah 6x1 through marl_vec.compat.benchmarl.MarlVecTask (configs/mamujoco/halfcheetah_6x1.yaml:
# 16 envs, SubprocVecEnv), against the uniform random policy's return, for MINUTES of wall time
# (default 20) on this machine's cores. Writes the CSV log (one row per collected batch) and the
# curve of the per-batch mean return against wall time, the random policy's mean drawn as a line.
#
#   bash scripts/train_with/learn_mamujoco_halfcheetah.sh                 # 20 minutes
#   MINUTES=12 OUT=/tmp/hc bash scripts/train_with/learn_mamujoco_halfcheetah.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PYTHON:-python}"
MINUTES="${MINUTES:-20}"
OUT="${OUT:-docs/images}"
CONFIG=mamujoco/halfcheetah_6x1
mkdir -p "$OUT"
echo "learn_mamujoco_halfcheetah.sh: the random policy's return (32 episodes of 1,000 steps); load: $(cut -d' ' -f1-3 /proc/loadavg)"
RANDOM_RETURN="$("$PY" scripts/train_with/random_baseline.py "$CONFIG" --episodes 32 --num-envs 16 --backend subproc \
    | tee /dev/stderr | awk '/^  return:/ {print $2}')"
echo "learn_mamujoco_halfcheetah.sh: MAPPO for $MINUTES minutes; load: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" scripts/train_with/benchmarl_mappo.py --config "$CONFIG" --num-envs 16 --frames-per-batch 8000 \
    --minibatch-size 800 --minibatch-iters 40 --lr 3e-4 --lmbda 0.95 --hidden 128 128 \
    --frames 100000000 --minutes "$MINUTES" --log "$OUT/mamujoco_halfcheetah_6x1_log.csv"
echo "learn_mamujoco_halfcheetah.sh: done; load: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" scripts/train_with/plot_log.py "$OUT/mamujoco_halfcheetah_6x1_log.csv" --x seconds --y batch_return \
    --window 5 --baseline "batch_return=$RANDOM_RETURN" --compare 5 \
    --out "$OUT/mamujoco_halfcheetah_6x1_return.png"
