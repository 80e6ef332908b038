#!/usr/bin/env bash
# The CPU pipeline on the tiny model, end to end, for 3 seeds (the README's main command):
#   make the tiny LLaDA -> masked SFT on a few labelled easy puzzles -> diffu-GRPO on unlabelled
#   harder puzzles -> greedy eval of both checkpoints on held-out puzzles -> the table.
# The seeds run as parallel single-threaded processes (2 cores: faster than one after another).
# Usage: bash lab/runs/toy.sh [seeds...]   (default: 0 1 2); outputs in out/toy/seed*/
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
SEEDS=${*:-0 1 2}
export OMP_NUM_THREADS=1 TQDM_MININTERVAL=5

run_seed() {
    s=$1; d=out/toy/seed$s
    rm -rf "$d"  # from scratch: the trainers refuse an --out-dir that holds an earlier run
    mkdir -p "$d"
    {
        $PY -m modelio.checkpoint --out-dir "$d/init" --seed "$s"
        $PY sft.py --model-dir "$d/init" --out-dir "$d/sft" --seed "$s"
        $PY grpo.py --model-dir "$d/sft" --out-dir "$d/grpo" --seed "$s"
        $PY eval.py --model-dir "$d/sft" --out-dir "$d/eval_sft" --json "$d/eval_sft.json"
        $PY eval.py --model-dir "$d/grpo" --out-dir "$d/eval_grpo" --json "$d/eval_grpo.json"
    } > "$d/log.txt" 2>&1 || { echo "seed $s failed, see $d/log.txt"; tail -20 "$d/log.txt"; return 1; }
    echo "seed $s done: $(tail -1 "$d/log.txt")"
}

start=$(date +%s)
pids=()
for s in $SEEDS; do run_seed "$s" & pids+=($!); done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
[ $status -eq 0 ] || exit 1
$PY -m lab.evals summarize out/toy
echo "total wall time: $(( $(date +%s) - start ))s"
