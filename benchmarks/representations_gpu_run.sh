#!/bin/bash
# The representations table (docs/representations.md) on a remote GPU machine, in one run of at
# most ten minutes.
#
#   python benchmarks/representations_gpu_prep.py    # here first: fills .devdata/ (see its docstring)
#   bash benchmarks/representations_gpu_run.sh       # there, with .devdata/ copied beside it
#
# Unpacks the weights, installs the carried wheels, starts CUDA MPS (the 40 processes then share
# the GPU at once; without it their kernels take turns), runs the eight commands of
# docs/representations.md (per task: the BERT row with its pooling baseline, and the other five
# rows) and tars the output directory and logs into $OUT/rep.tgz. EPOCHS / PATIENCE (25 / 6),
# JOBS_A / JOBS_B (5 / 3 workers per command), DEADLINE (seconds before the commands are stopped,
# 555; a stopped table is rewritten from results.json with --resume) and DEVICE (cuda) may be set.
set -u
T0=$(date +%s); W=/tmp/w; mkdir -p "$W/out"
log() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$W/main.log"; }
DEADLINE=${DEADLINE:-555}
xz -dc .devdata/models.tar.xz | tar xf - || exit 1
log "start $(date)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$W/main.log"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .devdata/whl/*.whl
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
python3 -c "import torch, contextvec.tasks.train; print('torch', torch.__version__)" 2>&1 | tee -a "$W/main.log"
MPS=0
if command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d && timeout 60 python3 -c "import torch; print('mps client ok', float(torch.ones(4, device='cuda').sum()))" 2>&1 | grep -q 'mps client ok'; then
    MPS=1
  else
    echo quit | nvidia-cuda-mps-control; sleep 1
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  fi
fi
log "MPS=$MPS"
(while true; do nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader >> "$W/gpu-util.log"
   free -g | grep Mem >> "$W/mem.log"; sleep 15; done) &
MONITOR=$!
T=.devdata/tasks
C="--output-dir $W/out --resume --device ${DEVICE:-cuda} --max-train all --hidden 300 --dropout 0.3 --lr 0.001
   --batch-size 64 --epochs ${EPOCHS:-25} --patience ${PATIENCE:-6} --threads 1 --quiet --bert .devdata/minilm
   --cache-dir /dev/shm/cache"
SST="--train $T/sst/trees/train.txt.gz --dev $T/sst/trees/dev.txt.gz"
TREC="--train $T/trec/train_5500.label.gz"
PIDS=()
for task in sst5 sst2 trec trec50; do
  case $task in sst*) DATA=$SST ;; *) DATA=$TREC ;; esac
  # shellcheck disable=SC2086  # word splitting of the option strings is meant
  setsid python3 -m contextvec.cli.main experiment representations $task $DATA $C \
    --representations words+bert --pool-baseline --jobs "${JOBS_B:-3}" > "$W/log-$task-bert.txt" 2>&1 &
  PIDS+=($!)
  # shellcheck disable=SC2086
  setsid python3 -m contextvec.cli.main experiment representations $task $DATA $C --jobs "${JOBS_A:-5}" \
    --representations words words+char words+cove words+cove+char words+elmo > "$W/log-$task-rest.txt" 2>&1 &
  PIDS+=($!)
done
log "launched ${#PIDS[@]} commands"
while true; do
  alive=0
  for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
  [ $alive -eq 0 ] && break
  if [ $(( $(date +%s) - T0 )) -ge "$DEADLINE" ]; then
    log "deadline: stopping $alive commands"
    for p in "${PIDS[@]}"; do kill -- -"$p" 2>/dev/null; done
    sleep 3; break
  fi
  sleep 5
done
log "runs finished: $(grep -c ': dev accuracy' "$W"/log-*.txt | tr '\n' ' ')"
kill $MONITOR
[ $MPS = 1 ] && echo quit | nvidia-cuda-mps-control
for f in "$W"/log-*.txt; do tail -3 "$f"; done >> "$W/main.log"
tar czf "$OUT/rep.tgz" -C "$W" . && cp "$W/main.log" "$OUT/main.log"
log done
