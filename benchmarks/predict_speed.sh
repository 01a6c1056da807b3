#!/bin/bash
# `contextvec predict` speed: an SST-2 model on the bundled ELMo over an N-line text file
# (SST training sentences repeated; N=100000 by default), then predict vs the bare encoder.
# Usage: bash benchmarks/predict_speed.sh [N] [THREADS]; work files in ${WORK:-/tmp/predict_speed}.
set -euo pipefail
N=${1:-100000}; THREADS=${2:-1}; WORK=${WORK:-/tmp/predict_speed}; mkdir -p "$WORK"
S=${SST:-../shared/data/tasks/sst/trees}
export OMP_NUM_THREADS=$THREADS
python - "$S/train.txt.gz" "$WORK/lines.txt" "$N" <<'PY'
import sys
from contextvec.tasks.readers import read_sst
lines = [" ".join(s) for s in read_sst(sys.argv[1], "sst5").sentences]
with open(sys.argv[2], "w", encoding="utf-8") as out:
    out.writelines(lines[i % len(lines)] + "\n" for i in range(int(sys.argv[3])))
PY
[ -f "$WORK/model/task.json" ] || contextvec train-task sst2 --train "$S/train.txt.gz" --dev "$S/dev.txt.gz" \
    --max-sentences 500 --epochs 2 --quiet --threads "$THREADS" --cache-dir "$WORK/cache" --save-model "$WORK/model"
/usr/bin/time -f "wall %e s, max RSS %M kB" contextvec predict "$WORK/model" "$WORK/lines.txt" "$WORK/out.jsonl" \
    --overwrite --quiet --threads "$THREADS"
python - "$WORK" "$THREADS" <<'PY'
import itertools, sys, time
import torch
from contextvec.tasks import load_task_model
torch.set_num_threads(int(sys.argv[2]))
lines = [l.split() for l in itertools.islice(open(f"{sys.argv[1]}/lines.txt", encoding="utf-8"), 2000)]
model = load_task_model(f"{sys.argv[1]}/model")
list(model.predict_stream(lines[:300]))  # warm-up
def timed(run):
    t = time.perf_counter(); run(); return time.perf_counter() - t
encoder = lambda: list(model.encoder.embed_batches(lines, 64, 4096))
predict = lambda: list(model.predict_stream(lines))
enc, pred = timed(encoder), timed(predict)
enc, pred = min(enc, timed(encoder)), min(pred, timed(predict))  # alternated, best of two
print(f"{len(lines)} lines: bare encoder {len(lines) / enc:.1f} sentences/s, predict {len(lines) / pred:.1f}")
PY
