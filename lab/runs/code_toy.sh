#!/usr/bin/env bash
# The CPU code toy on the tiny model, end to end, for 3 seeds (programming by example, taskdata/pbe.py):
#   make the tiny LLaDA -> masked SFT on (shown pairs -> one-line function) -> diffu-GRPO with d1's
#   coding reward (first ```python fence, every hidden `assert` run in sandbox/run.py) -> greedy eval of both
#   checkpoints on functions of held-out semantic classes -> the table.
# The same path as the real code task: rewards.coding_reward, sandbox.run_batch, eval.py's JSONL + manifest.
# Usage: bash lab/runs/code_toy.sh [seeds...]   (default: 0 1 2); outputs in out/code_toy/seed*/
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
SEEDS=${*:-0 1 2}
export OMP_NUM_THREADS=1 TQDM_MININTERVAL=5
# the canvas: a fenced one-liner fits 48 tokens (byte tokenizer), 3 blocks of 16, two tokens per step
CANVAS="--gen-length 48 --block-length 16 --diffusion-steps 24"
# 2500 steps: at 1500 the model still wrote a default constant instead of copying it (0-1 % held out)
SFT_FLAGS=${SFT_FLAGS:---num-examples 8000 --max-steps 2500}
GRPO_FLAGS=${GRPO_FLAGS:-}  # python -m methods.grpo's: grpo.py's round, or the field's with its flags

run_seed() {
    s=$1; d=out/code_toy/seed$s
    rm -rf "$d"  # from scratch: the trainers refuse an --out-dir that holds an earlier run
    mkdir -p "$d"
    {
        $PY -m modelio.checkpoint --out-dir "$d/init" --seed "$s"
        # prompt (chat template + ~50 pair characters) + 48 completion tokens fit 128
        $PY sft.py --task pbe --model-dir "$d/init" --out-dir "$d/sft" --seed "$s" --max-length 128 $SFT_FLAGS
        $PY -m methods.grpo --task pbe --model-dir "$d/sft" --out-dir "$d/grpo" --seed "$s" $CANVAS $GRPO_FLAGS
        $PY eval.py --task pbe --model-dir "$d/sft" --out-dir "$d/eval_sft" --json "$d/eval_sft.json"
        $PY eval.py --task pbe --model-dir "$d/grpo" --out-dir "$d/eval_grpo" --json "$d/eval_grpo.json"
    } > "$d/log.txt" 2>&1 || { echo "seed $s failed, see $d/log.txt"; tail -20 "$d/log.txt"; return 1; }
    echo "seed $s done: $(tail -1 "$d/log.txt")"
}

start=$(date +%s)
pids=()
for s in $SEEDS; do run_seed "$s" & pids+=($!); done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
[ $status -eq 0 ] || exit 1
$PY -m lab.evals summarize out/code_toy
echo "total wall time: $(( $(date +%s) - start ))s"
