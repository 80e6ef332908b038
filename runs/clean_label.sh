#!/usr/bin/env bash
# Issue 11's clean-label question, as a new user met it: masked SFT on CLEAN labels (150 steps), then
# diffu-GRPO at its defaults, with the held-out curve (--eval-every 5) and the variants that test each
# suspect: prompt mask off, coupled and ELBO estimators inside GRPO, a 6x larger batch (also with a 3x
# smaller learning rate); then the agreement between the gradients of independent batches
# (study_signal.py) for the clean SFT models. Roughly 40 min for 3 seeds on 2 cores with AVX512-BF16
# (estimated from the variants run one by one; the script as a whole has not been timed).
# The findings are in the README, "What we measured about d1".
# Usage: bash runs/clean_label.sh [seeds...]   (default: 0 1 2); outputs in out/clean/seed*/
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
SEEDS=${*:-0 1 2}
export OMP_NUM_THREADS=1 TQDM_MININTERVAL=30
VARIANTS=("default:" "p0:--p-mask 0" "coupled:--estimator coupled" "elbo:--estimator elbo"
          "big:--prompts-per-step 96 --groups-per-micro 16"
          "big-lr1e-4:--prompts-per-step 96 --groups-per-micro 16 --lr 1e-4")

run_seed() {
    s=$1; d=out/clean/seed$s
    mkdir -p "$d"
    {
        $PY model.py --out-dir "$d/init" --seed "$s"
        $PY sft.py --model-dir "$d/init" --out-dir "$d/sft" --seed "$s" --toy-unfilled 0 --max-steps 150
        for v in "${VARIANTS[@]}"; do
            # shellcheck disable=SC2086  # the flags are meant to split
            $PY grpo.py --model-dir "$d/sft" --out-dir "$d/grpo-${v%%:*}" --seed "$s" --eval-every 5 ${v#*:}
        done
    } > "$d/log.txt" 2>&1 || { echo "seed $s failed, see $d/log.txt"; tail -20 "$d/log.txt"; return 1; }
    echo "seed $s done"
}

start=$(date +%s)
pids=()
for s in $SEEDS; do run_seed "$s" & pids+=($!); done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
[ $status -eq 0 ] || exit 1
rm -f out/clean/signal.jsonl
for s in $SEEDS; do
    for p in 0.15 0; do  # the clean SFT model next to the incomplete-label one of make run, when it is there
        $PY study_signal.py --model-dir "out/clean/seed$s/sft" --p-mask $p --json out/clean/signal.jsonl
        if [ -d "out/toy/seed$s/sft" ]; then
            $PY study_signal.py --model-dir "out/toy/seed$s/sft" --p-mask $p --json out/clean/signal.jsonl
        fi
    done
done
$PY metrics.py out/clean/seed*/grpo-* --keys heldout_acc,seen_grid_acc,reward,token_nll --table
echo "total wall time: $(( $(date +%s) - start ))s"
