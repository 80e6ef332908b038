"""
The best checkpoint by VALIDATION accuracy (grpo.py --val-size N --eval-every K; docs/evaluation.md
"An honest protocol"): whenever val_acc (ops/validation.py) strictly improves, that round is
saved (if it was not already) and <out-dir>/best.json names it:

    {"step": 12, "val_acc": 41.5, "save": "saves/step-000012", "val_items": 100}

written atomically; ops/resume.py's --keep-last pruning never deletes the save it names, and a
--resume reads it back, so the best value survives a restart. The test set is never read here: the
selected save and the final one are evaluated on it afterwards (docs/evaluation.md).

    best = Best(args, run, start_round, lambda step: save_checkpoint(..., step, make_public=False),
                curve, metrics_file)       # a fresh run: the start model's val_acc, logged as step 0
    best.update(step, curve, saved)        # every rank, after the round's own save
"""
import json
import math
import os

from ops.ddp import everywhere
from ops.metrics import eval_due, log_metrics, read_json
from ops.resume import BEST_FILE, SAVES_DIR, save_dir


def improved(value, best):
    """Strictly better: a tie keeps the earlier round (fewer updates away from the start model)."""
    return value is not None and not math.isnan(value) and value > best


def write_best(out_dir, record):
    """best.json, written to a temporary file and renamed over the old one: never half a file."""
    path = os.path.join(out_dir, BEST_FILE)
    with open(path + ".tmp", "w") as f:
        json.dump(record, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)


class Best:
    """Keeps the best validation round of a grpo.py run. Every rank holds one and calls update() at
    the same steps (saving is a collective); rank 0 alone evaluates, decides, and writes best.json."""

    def __init__(self, args, run, start_step, save, curve=None, metrics_file=None):
        """save(step): a collective save of round `step`. On a fresh run the start model is measured
        (curve: rank 0's ValCurve, else None) and logged as step 0: the round to beat."""
        self.on = bool(args.eval_every and args.val_size)
        self.every, self.rounds, self.out_dir = args.eval_every, args.rounds, args.out_dir
        self.run, self.save = run, save
        self.value, self.start = -math.inf, start_step
        path = os.path.join(args.out_dir, BEST_FILE)
        if self.on and args.resume and os.path.isfile(path):
            rec = read_json(path)
            # a best round after the save we resume from (its save was not whole) is measured again
            self.value = rec["val_acc"] if rec["step"] <= start_step else -math.inf
        if curve and start_step == 0:
            log_metrics(metrics_file, {"step": 0, "elapsed_s": 0.0, **curve()})
        self.update(0, curve, saved=False)

    def update(self, step, curve, saved):
        """After round `step` (0: the start model, skipped on a resume): when val_acc was measured and beat
        the best so far, save the round unless `saved`, then point best.json at it. curve: rank 0's
        ValCurve, else None. -> whether it improved."""
        if not self.on or step < self.start or not eval_due(step, self.every, self.rounds):
            return False
        value = curve.last.get("val_acc") if curve is not None else None
        # rank 0 decides; the others agree with it (MIN over ranks of "improved" and their own True)
        better = everywhere(improved(value, self.value) if self.run.master else True, self.run)
        if not better:
            return False
        if not saved:
            self.save(step)  # every rank: a collective under FSDP
        if self.run.master:
            self.value = value
            write_best(self.out_dir, {"step": step, "val_acc": value, "val_items": curve.items,
                                      "save": os.path.relpath(save_dir(self.out_dir, step), self.out_dir)})
            print(f"best val_acc {value:.2f}% at round {step}: {SAVES_DIR}/step-{step:06d} (best.json)")
        return True
