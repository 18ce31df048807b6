#!/usr/bin/env bash
# The zoo's models at the paper's sizes on a GPU, in one command for a short lease of a
# GPU machine (bench/RESULTS.md, "The zoo's models at the paper's size on a GPU"):
#   SAT_TUTORIAL_DATA=<folder with mnist/ and binarized_mnist/> OUT=<folder> bash bench/gpu_zoo.sh
# RAM (28×28 and translated 60×60, the paper's glimpse networks, the command's 100-epoch schedule cut
# by the time budget, which the learning rate anneals to) and DRAW at the paper's size
# (T = 64, 256-unit LSTMs, z = 100, read 2×2, write 5×5) with and without attention train
# side by side, one process each (each is bound by kernel launches, not by the GPU's
# arithmetic). Then bench/bench_decoder_launch.py runs alone. Each run comes back as
# OUT/NAME.tar: its metrics, its log, and its weights (DRAW's checkpoint without the
# optimiser's state, to fit what a lease returns).
# Run 2026-11-30 with MIN=5, the data in a git-ignored folder carried to the machine, and, since the lent machine
# has no rapidfuzz (the CLI imports OCR's metrics), PYTHONPATH to a two-file stand-in for it (OCR was not run).
#   MIN=0.3 DEV=cpu RAM_EXTRA='--limit 2000' DRAW_EXTRA='--steps 3 -T 4' bash bench/gpu_zoo.sh   # smoke run
set -u
OUT=${OUT:-bench/out/gpu_zoo}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" SAT_TUTORIAL_OFFLINE=1 MPLBACKEND=Agg
PY=${PY:-python3}; DEV=${DEV:-cuda}; MIN=${MIN:-5.5}
RUNS=$(mktemp -d)
common="--time-budget $MIN --seed 0 --device $DEV --threads 2"
run() { local name=$1; shift; echo "=== $name ($(date +%T)): sat-tutorial $* $common" | tee -a "$OUT/run.log"
        (cd "$RUNS" && timeout $((${MIN%.*} * 60 + 240)) "$PY" -m sat_tutorial "$@" $common --out "$name" > "$name.log" 2>&1
         echo "=== $name exit $? ($(date +%T))" >> "$name.log") & }
[ "$DEV" = cuda ] && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/run.log"
$PY -c "import torch; print('torch', torch.__version__)" | tee -a "$OUT/run.log"
run ram-mnist ram train --task mnist --quiet ${RAM_EXTRA:-}
run ram-translated ram train --task translated --quiet ${RAM_EXTRA:-}
run draw-mnist-t64 draw train --attention --batch-size 128 --binarization fixed ${DRAW_EXTRA:-}
run draw-mnist-plain-t64 draw train --no-attention --batch-size 128 --binarization fixed ${DRAW_EXTRA:-}
wait
for name in ram-mnist ram-translated draw-mnist-t64 draw-mnist-plain-t64; do
  tr '\r' '\n' < "$RUNS/$name.log" | grep -v "it/s\]\|step/s\]" | tail -n 6 | tee -a "$OUT/run.log"
  if [ -f "$RUNS/$name/checkpoint.pt" ]; then  # DRAW: the weights, config and curve only
    $PY -c "import torch,sys; p=sys.argv[1]; ck=torch.load(p, map_location='cpu', weights_only=True)
keep=('format','kind','version','config','model','losses','minutes','step','run')
torch.save({k: ck[k] for k in keep if k in ck}, p)" "$RUNS/$name/checkpoint.pt"
  fi
  rm -f "$RUNS/$name/ram.pt"   # RAM: best.pt is what ships
  tar -C "$RUNS" -cf "$OUT/$name.tar" "$name" "$name.log"
done
echo "=== decoder ($(date +%T))" | tee -a "$OUT/run.log"
timeout 150 $PY bench/bench_decoder_launch.py --device $DEV ${DEC_EXTRA:-} --out "$OUT/decoder_launch.json" 2>&1 | tee -a "$OUT/run.log"
echo "=== done ($(date +%T))" | tee -a "$OUT/run.log"
