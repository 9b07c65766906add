#!/usr/bin/env bash
# The performance suite in one command (issue: "what distillation buys and what it costs").
# Run on an otherwise idle machine: two jobs on the same cores slow each other by up to 10x.
# Writes benchmarks/results/{inference_speed,similarity_search,step_breakdown,step_time}.{json,md}.
#   bash benchmarks/performance.sh
set -euo pipefail
cd "$(dirname "$0")"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python inference_speed.py --teachers minilm mpnet --ks 2 3 4 --batch_sizes 32 64 --seq_lens 64 128 256 --batches 3
python similarity_search.py --ns 1000 10000 --pair_sample 2048 --student_layers 2
python step_breakdown.py --seq_lens 64 128 256 --steps 6 --full_seq 128 --full_steps 50 --rounds 1
python step_time.py --steps 30 --rounds 3
