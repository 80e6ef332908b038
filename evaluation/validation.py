"""
grpo.py --eval-every N --val-size M: greedy accuracy on the validation split (taskdata/splits.py
carve_validation, items of the TRAINING data) every N rounds, with eval.py's protocol: d1's eval
prompt, block 32 (the toys: their record's), steps = gen / 2, greedy, low-confidence remasking.
Logged as val_acc (and val_acc/<task> when several tasks are mixed); ops/best.py keeps the best round.
With --test-curve the toy's test-set study curve (evaluate.toy_curve_sets: heldout_acc, train_acc) is
logged beside it: a study's view of the test set, never used to select anything.

    from evaluation.validation import make_curve     # grpo.py; rank 0 only
"""
import time

import tasks
from evaluation.evaluate import accuracy, eval_schedule, run_items, toy_accuracies, toy_curve_sets
from ops.metrics import eval_due


def val_schedule(task, rollout_gen, val_gen=0):
    """(gen length, block, steps, batch size) of task's validation eval: --val-gen-length, else the
    rollout canvas (the toys: their eval canvas); then eval.py's defaults for that length."""
    gen = val_gen or tasks.get(task).canvas or rollout_gen
    return (gen, *eval_schedule(task, gen))


def pooled_accuracy(per_task, counts):
    """The mean over all validation items of mixed tasks: each task's accuracy (%) weighted by its item count."""
    total = sum(counts.values())
    return sum(per_task[t] * counts[t] for t in per_task) / total


class ValCurve:
    """Calling it returns {"val_acc": %, ["val_acc/<task>": % ...], [the test curve's ...]}, keeps the
    result in .last and adds its time to .seconds (kept out of the training clock). `val`: the validation
    examples, each with its "task"; test: --test-curve's (toy task, evaluate.toy_curve_sets) or None."""

    def __init__(self, model, tokenizer, every, rounds, val, rollout_gen, val_gen=0, test=None):
        self.model, self.tokenizer, self.test = model, tokenizer, test
        self.every, self.rounds = every, rounds
        self.by_task = {}
        for i, ex in enumerate(val):  # an item's id is its place in the validation split
            self.by_task.setdefault(ex["task"], []).append((i, ex))
        self.schedule = {t: val_schedule(t, rollout_gen, val_gen) for t in self.by_task}
        names = ["val_acc"] * bool(val) + [f"val_acc/{t}" for t in self.by_task if len(self.by_task) > 1]
        self.sets = names + list(test[1] if test else [])  # the names report_round prints
        self.seconds, self.last, self.items = 0.0, {}, len(val)

    def due(self, step):
        return eval_due(step, self.every, self.rounds)

    def __call__(self):
        t0, acc = time.time(), {}
        for task, items in self.by_task.items():
            gen, block, steps, batch = self.schedule[task]
            acc[task] = accuracy(task, run_items(self.model, self.tokenizer, task, items, gen, block, steps,
                                                 batch_size=batch))
        out = {"val_acc": pooled_accuracy(acc, {t: len(v) for t, v in self.by_task.items()})} if acc else {}
        if len(acc) > 1:
            out.update({f"val_acc/{t}": a for t, a in acc.items()})
        if self.test:  # on the same clock: both are kept out of training time
            out.update(toy_accuracies(self.model, self.tokenizer, self.test[1], self.test[0]))
        self.seconds += time.time() - t0
        self.last = out
        return out


def make_curve(args, model, tokenizer, val):
    """grpo.py's --eval-every curve from its flags: the validation split, plus --test-curve's study curve."""
    test = (args.task, toy_curve_sets(args.task, args.eval_items, args.data_seed)) if args.test_curve else None
    return ValCurve(model, tokenizer, args.eval_every, args.rounds, val, args.gen_length, args.val_gen_length, test)
