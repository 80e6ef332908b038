"""
grpo.py --eval-every N --val-size M: greedy accuracy on the validation split (taskdata/splits.py
carve_validation, items of the TRAINING data) every N rounds, with eval.py's protocol (eval.py builds the
curve: validation_curve), logged as val_acc (and val_acc/<task> when several tasks are mixed); ops/best.py
keeps the best round. With --test-curve the toy's test-set study curve (heldout_acc, train_acc) is
logged beside it: a study's view of the test set, never used to select anything.

    curve = ValCurve(every, rounds, val, measure, test)    # eval.validation_curve makes it; rank 0 only
    if curve.due(step): record.update(curve())
"""
import time

from ops.metrics import eval_due


def pooled_accuracy(per_task, counts):
    """The mean over all validation items of mixed tasks: each task's accuracy (%) weighted by its item count."""
    total = sum(counts.values())
    return sum(per_task[t] * counts[t] for t in per_task) / total


class ValCurve:
    """Calling it returns {"val_acc": %, ["val_acc/<task>": % ...], [the test curve's ...]}, keeps the
    result in .last and adds its time to .seconds (kept out of the training clock). `val`: the validation
    examples, each with its "task"; measure(task, [(id, example)]) -> accuracy %; test: --test-curve's
    {name: () -> accuracy %}, or None."""

    def __init__(self, every, rounds, val, measure, test=None):
        self.every, self.rounds, self.measure, self.test = every, rounds, measure, test or {}
        self.by_task = {}
        for i, ex in enumerate(val):  # an item's id is its place in the validation split
            self.by_task.setdefault(ex["task"], []).append((i, ex))
        names = ["val_acc"] * bool(val) + [f"val_acc/{t}" for t in self.by_task if len(self.by_task) > 1]
        self.sets = names + list(self.test)  # the names report_round prints
        self.seconds, self.last, self.items = 0.0, {}, len(val)

    def due(self, step):
        return eval_due(step, self.every, self.rounds)

    def __call__(self):
        t0 = time.time()
        acc = {task: self.measure(task, items) for task, items in self.by_task.items()}
        out = {"val_acc": pooled_accuracy(acc, {t: len(v) for t, v in self.by_task.items()})} if acc else {}
        if len(acc) > 1:
            out.update({f"val_acc/{t}": a for t, a in acc.items()})
        out.update({name: point() for name, point in self.test.items()})  # on the same clock: out of training time
        self.seconds += time.time() - t0
        self.last = out
        return out
