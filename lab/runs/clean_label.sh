#!/usr/bin/env bash
# The clean-label question: does diffu-GRPO raise held-out accuracy after SFT on CLEAN labels?
# The findings are in docs/findings.md, "Why diffu-GRPO does not help after clean-label SFT"; each part
# below is one of its tables.
#
# Part 1, as a new user met it (lr 3e-4, the toy default then): SFT on clean labels for 150 steps, then
#   diffu-GRPO with the held-out curve (--eval-every 5 --test-curve) and one variant per suspect: prompt mask off,
#   coupled and ELBO estimators, a 6x larger batch (also at lr 1e-4); then the agreement between the
#   gradients of independent batches (python -m lab.study_signal) for the clean and the incomplete-label SFT models.
# Part 2, the settings tried to make RL help (lr 1e-4, today's default): SFT on clean labels at sft.py's
#   default 400 steps, then diffu-GRPO at its defaults (a) on the same puzzles (2-5 blanks) and
#   (b) easy-to-hard: RL on unlabelled 4-7 blank puzzles, evaluated on held-out 4-7 blank puzzles.
# Roughly 40 + 25 min for 3 seeds on 2 cores (the parts were measured run by run, with these flags;
# the script as a whole has not been timed).
# Usage: bash lab/runs/clean_label.sh [seeds...]   (default: 0 1 2); outputs in out/clean/seed*/
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
SEEDS=${*:-0 1 2}
export OMP_NUM_THREADS=1 TQDM_MININTERVAL=30
VARIANTS=("default:" "p0:--p-mask 0" "coupled:--estimator coupled" "elbo:--estimator elbo"
          "big:--prompts-per-step 96 --groups-per-micro 16"
          "big-lr1e-4:--prompts-per-step 96 --groups-per-micro 16 --lr 1e-4")

run_seed() {
    s=$1; d=out/clean/seed$s
    rm -rf "$d"  # from scratch: the trainers refuse an --out-dir that holds an earlier run
    mkdir -p "$d"
    {
        $PY -m modelio.checkpoint --out-dir "$d/init" --seed "$s"
        # part 1
        $PY sft.py --model-dir "$d/init" --out-dir "$d/sft" --seed "$s" --toy-unfilled 0 --max-steps 150
        for v in "${VARIANTS[@]}"; do
            # --lr 3e-4 first: a variant's own --lr comes later and wins; methods.grpo: grpo.py's round, with
            # the field's --estimator for the estimator rows
            # shellcheck disable=SC2086  # the flags are meant to split
            $PY -m methods.grpo --model-dir "$d/sft" --out-dir "$d/grpo-${v%%:*}" --seed "$s" --eval-every 5 --test-curve \
                --lr 3e-4 ${v#*:}
        done
        # part 2
        $PY sft.py --model-dir "$d/init" --out-dir "$d/sft400" --seed "$s" --toy-unfilled 0
        $PY grpo.py --model-dir "$d/sft400" --out-dir "$d/grpo400" --seed "$s" --eval-every 10 --test-curve
        $PY grpo.py --model-dir "$d/sft400" --out-dir "$d/grpo400-hard" --seed "$s" --toy-blanks 4,7
        for m in sft400 grpo400-hard; do
            $PY eval.py --model-dir "$d/$m" --toy-blanks 4,7 --out-dir "$d/eval-hard-$m" --json "$d/eval-hard-$m.json"
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
        $PY -m lab.study_signal --model-dir "out/clean/seed$s/sft" --p-mask $p --json out/clean/signal.jsonl
        if [ -d "out/toy/seed$s/sft" ]; then
            $PY -m lab.study_signal --model-dir "out/toy/seed$s/sft" --p-mask $p --json out/clean/signal.jsonl
        fi
    done
    # part 2's easy-to-hard prompts
    $PY -m lab.study_signal --model-dir "out/clean/seed$s/sft400" --toy-blanks 4,7 --json out/clean/signal.jsonl
done
$PY -m ops.metrics out/clean/seed*/grpo* --keys heldout_acc,train_acc,reward,token_nll,zero_std_groups --table
grep -h accuracy out/clean/seed*/eval-hard-*.json
echo "total wall time: $(( $(date +%s) - start ))s"
