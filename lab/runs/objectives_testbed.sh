#!/usr/bin/env bash
# The objectives on the testbed (docs/objectives.md, "On the testbed"): first the agreement of each objective's
# gradient between independent rollout batches on seed 0's SFT model (python -m lab.study_signal, 8 batches of the
# preset's 16 prompts x 6), then SFT alone against SFT + JustGRPO, and against SFT + the other objective named in
# $BEST, paired over seeds 0-4 (python -m lab.compare; the SFT models are shared with every testbed comparison).
# JustGRPO runs at its paper's loss settings (ε 0.2, std-scaled advantages, μ 1) with its AR sampler; every other
# flag is the testbed preset's.
# Usage: bash lab/runs/objectives_testbed.sh [signal|compare|all]   (default all); outputs in out/study/, out/compare/
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
export OMP_NUM_THREADS=1 TQDM_MININTERVAL=60
SFT=out/compare/sft-316deacc/seed0/sft  # seed 0's testbed SFT model (lab.compare's cache for the testbed recipe)
JUSTGRPO="--objective justgrpo --block-length 1 --diffusion-steps 48 --epsilon 0.2 --scale-std --num-iterations 1"
BEST=${BEST:---objective trajectory --trajectory-segments 24 --p-mask 0}
VARIANTS=("d1:" "d1, p_mask 0:--p-mask 0" "wd1:--objective wd1" "spg:--objective spg" "espo:--objective espo"
          "trajectory, 3 segments (blocks):--objective trajectory --trajectory-segments 3"
          "trajectory, 24 segments (steps), p_mask 0:--objective trajectory --trajectory-segments 24 --p-mask 0"
          "justgrpo:$JUSTGRPO")  # the costly one last
if [ "${1:-all}" != compare ]; then
    [ -f "$SFT/config.json" ] || $PY -m lab.compare --a "--rounds 0" --b "--rounds 0 --seed 0" --seeds 0
    rm -f out/study/signal_objectives.jsonl
    for v in "${VARIANTS[@]}"; do
        echo "== ${v%%:*}"
        # shellcheck disable=SC2086
        $PY -m lab.study_signal --preset testbed --model-dir "$SFT" --batches 8 --json out/study/signal_objectives.jsonl \
            ${v#*:}
    done
fi
if [ "${1:-all}" != signal ]; then
    $PY -m lab.compare --a "--rounds 0" --b "$JUSTGRPO" --seeds 0,1,2,3,4 --jobs 2
    $PY -m lab.compare --a "--rounds 0" --b "$BEST" --seeds 0,1,2,3,4 --jobs 2
fi
