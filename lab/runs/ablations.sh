#!/usr/bin/env bash
# d1's ablations in miniature on the toy of `make run`: from each seed's SFT checkpoint (out/toy/seed*/sft,
# written by lab/runs/toy.sh), diffu-GRPO at the toy defaults (mu 2, p_mask 0.15, random prompt mask, one-step
# estimator) and one variant per knob, each with the held-out curve (--eval-every 5 --test-curve: a study's view
# of the test set, never used to select anything). Then the table and the curves: python -m lab.study_ablations.
# Two runs at a time (2 cores), single-threaded each. Every run is `python -m methods.grpo`: grpo.py's round,
# with the field's --estimator for the estimator rows (methods/estimators.py).
# Every run is at lr 3e-4, the lr of the table in docs/findings.md (grpo.py's toy default is 1e-4, see
# docs/LOG.md): this script regenerates that table; drop LR_FLAGS to ablate around today's default.
# Usage: bash lab/runs/ablations.sh [seeds...]   (default: 0 1 2); outputs in out/ablate/<variant>/seed*/
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
SEEDS=${*:-0 1 2}
export OMP_NUM_THREADS=1 TQDM_MININTERVAL=60
LR_FLAGS=${LR_FLAGS---lr 3e-4}
VARIANTS=("default:" "fixed-mask:--fixed-mask-seed"                                       # d1 Fig. 4
          "mu1:--num-iterations 1" "mu4:--num-iterations 4" "mu8:--num-iterations 8"         # d1 Fig. 5
          "p_mask0:--p-mask 0" "p_mask0.3:--p-mask 0.3"
          "coupled:--estimator coupled" "elbo:--estimator elbo")   # 2 rows each: compare with mu4's cost too
for s in $SEEDS; do
    [ -f "out/toy/seed$s/sft/config.json" ] || bash lab/runs/toy.sh "$s"
done
start=$(date +%s)
jobs_file=$(mktemp)
# no trailing blank on a line: xargs -L would join it with the next
for v in "${VARIANTS[@]}"; do for s in $SEEDS; do echo "$s ${v%%:*} ${v#*:}" | sed 's/ *$//' >> "$jobs_file"; done; done
# two at a time; each line: seed, variant, its flags
# shellcheck disable=SC2016
xargs -P 2 -L 1 bash -c 'd=out/ablate/$1/seed$0; rm -rf "$d"; mkdir -p "$d"; '"$PY"' -m methods.grpo --model-dir out/toy/seed$0/sft \
    --out-dir "$d" --seed $0 --eval-every 5 --test-curve '"$LR_FLAGS"' "${@:2}" > "$d/log.txt" 2>&1 && echo "$1 seed $0 done"' < "$jobs_file"
rm -f "$jobs_file"
# the README's picture when matplotlib (optional) is installed; the table and curves.json always
if $PY -c "import matplotlib" 2> /dev/null; then
    $PY -m lab.study_ablations out/ablate --png docs/ablations.png
else
    $PY -m lab.study_ablations out/ablate
fi
echo "total wall time: $(( $(date +%s) - start ))s"
