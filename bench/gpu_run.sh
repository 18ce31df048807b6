#!/usr/bin/env bash
# The GPU measurements of bench/RESULTS.md ("Throughput on a GPU"), in one command for a short lease of a GPU machine:
#   SAT_TUTORIAL_DATA=<folder with flickr8k/> OUT=<folder for logs and JSON> bash bench/gpu_run.sh
# Each step has its own time limit, so one failure leaves the others' numbers. ResNet-101 runs with random weights
# and batch-norm statistics measured on 64 images (torchvision's weights cannot be downloaded offline; the speed is the
# same). Needs torch, torchvision, h5py, tqdm, pillow, and pycocoevalcap for the training commands' validation.
# Stop 35 ran ONLY='fp16|cli_hard|resume' with the first 1,024 train (128 val, 128 test) images and a trimmed
# dataset_flickr8k.json carried in a git-ignored folder (SAT_TUTORIAL_DATA=.gpu_data), and pycocoevalcap's BLEU, CIDEr and
# ROUGE code carried without its Java parts (PYTHONPATH; the lent machine has no pycocoevalcap).
set -u
OUT=${OUT:-bench/out/gpu}; mkdir -p "$OUT" bench/out
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PY:-python3}
LOG=$(mktemp)   # each step's output goes to $OUT/run.log; its last lines (no progress bars) to the terminal
ONLY=${ONLY:-.}  # a regular expression: run only the steps whose names match
step() { local name=$1 limit=$2; shift 2; [[ $name =~ $ONLY ]] || return 0; echo "=== $name ($(date +%T), limit ${limit}s): $*" | tee -a "$OUT/run.log"
         timeout "$limit" "$@" > "$LOG" 2>&1; local rc=$?; cat "$LOG" >> "$OUT/run.log"
         echo "=== $name exit $rc" | tee -a "$OUT/run.log"; tr '\r' '\n' < "$LOG" | grep -v "img/s\]\|step/s\]\|it/s\]" | tail -n 14; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'tf32 matmul', torch.backends.cuda.matmul.allow_tf32, 'bf16', torch.cuda.is_bf16_supported())"
step disk 60 bash -c 'dd if=/dev/zero of=bench/out/dd.tmp bs=1M count=1024 conv=fsync 2>&1 | tail -1; rm -f bench/out/dd.tmp'
TP="$PY bench/bench_flickr8k.py throughput --encoder resnet101 --encoder-weights none --image-size 448 --limit-images 1024 --workers 8 --extract-batch 128"
step soft_b64 150 $TP --model soft --batch-size 64 --steps 40 --online-steps 10 --fine-tune 1 --attribute --extract-images 1280 --profile-extraction 25 --out "$OUT/soft_b64.json"
step hard_b64 90 $TP --model hard --batch-size 64 --steps 40 --online-steps 10 --extract-images 256 --out "$OUT/hard_b64.json"
step soft_b256 60 $TP --model soft --batch-size 256 --steps 20 --online-steps 5 --extract-images 256 --out "$OUT/soft_b256.json"
step decoder_b32 60 $PY bench/bench_soft_attention.py --device cuda --profile 0 --reps 5 --steps 5 --warmup 2 --out "$OUT/soft_attention_gpu_b32.json"
step decoder_b256 60 $PY bench/bench_soft_attention.py --device cuda --profile 0 --reps 5 --steps 5 --warmup 2 --batch-size 256 --out "$OUT/soft_attention_gpu_b256.json"
step cli_hard_amp 75 $PY -m sat_tutorial train --data scenes --model hard --amp --steps 300 --val-every 100 --device cuda --out "$OUT/cli_hard_amp"
# fp16 with loss scaling (stop 35; the H200 has bf16, so --amp-dtype fp16 asks for it): the same rows in fp16 beside bf16,
# exact resume with the scaler's state, and the scenes run of cli_hard_amp in fp16
step fp16_soft 150 $TP --model soft --batch-size 64 --steps 40 --online-steps 10 --amp-dtype bf16 fp16 --extract-images 256 --out "$OUT/fp16_soft.json"
step fp16_hard 120 $TP --model hard --batch-size 64 --steps 40 --online-steps 10 --amp-dtype bf16 fp16 --extract-images 256 --out "$OUT/fp16_hard.json"
step resume_fp16_soft 90 $PY bench/bench_resume.py --device cuda --model soft --amp-dtype fp16 --deterministic --out "$OUT/resume_fp16_soft.json"
step resume_fp16_hard 90 $PY bench/bench_resume.py --device cuda --model hard --amp-dtype fp16 --deterministic --out "$OUT/resume_fp16_hard.json"
step cli_hard_fp16 75 $PY -m sat_tutorial train --data scenes --model hard --amp-dtype fp16 --steps 300 --val-every 100 --device cuda --out "$OUT/cli_hard_fp16"
rm -f "$OUT"/cli_hard_*/*.pt "$OUT"/cli_hard_*/config.json   # at most 8 files come back from a lease
