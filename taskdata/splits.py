"""
The data splits. d1's eval subsets (d1_eval_subset: the items d1's eval scores of a test file), and
the honest protocol's splits (docs/evaluation.md "An honest protocol"): what grpo.py trains on, what
it validates on, and which training puzzles it must not see. Pure functions over example dicts.

  - sudoku_solution_split: 4x4 Sudoku has only 288 solution grids, so d1's ~1M training puzzles share
    their solutions with its 500-row test set. The Sudoku split by solution grid (docs/evaluation.md)
    drops the training puzzles whose solution grid is in the test file, so the test set stays d1's
    (--sudoku-split solution).
  - carve_validation: a validation split carved from the TRAINING examples (never the test set), on
    which grpo.py --eval-every measures accuracy and keeps the best round (--val-size N).
  - protocol_split: both, as grpo.py's flags ask, with the record that goes into every manifest.

    from taskdata.splits import carve_validation, sudoku_solution_split
    kept, dropped = sudoku_solution_split(train, {"1234341221434321"})
    train, val = carve_validation(train, 100, seed=0)
"""
import json
import os
import random

import numpy as np

INFO_FILE = "save_info.json"  # ops/resume.py's name for a save's record (not imported: taskdata stays below ops)
SPLIT_KEYS = ("sudoku_split", "sudoku_test", "sudoku_dropped", "val_size", "val_seed")


def d1_eval_subset(n_items, k=256, seed=42):
    """Indices d1 evaluates: np.random.seed(42); np.random.choice(n, k, replace=False)
    (docs/d1.md §8.1 item 3). n == k (Countdown) -> a permutation, as in d1."""
    # k=None/-1 (GSM8K, MATH: d1's subsample -1) or n < k (where d1 would crash): all items in order
    if k is None or k < 0 or n_items < k:
        return list(range(n_items))
    # private RandomState: np.random.seed(42)+choice's stream (legacy MT19937); global RNG untouched
    return np.random.RandomState(seed).choice(n_items, k, replace=False).tolist()


def d1_subset(examples):
    """A test file's held-out items (a record's `heldout`): Countdown and Sudoku, d1's 256 items
    (docs/d1.md §8.1)."""
    return d1_eval_subset(len(examples))


def sudoku_solution_split(train, test_solutions):
    """(the training examples whose 16-char "solution" is NOT in test_solutions, how many were dropped)."""
    test = set(test_solutions)
    kept = [ex for ex in train if ex["solution"] not in test]  # order kept: d1's shuffle stays as it was
    return kept, len(train) - len(kept)


def carve_validation(examples, n, seed):
    """(train, val): n examples drawn with random.Random(seed) become the validation split; train keeps
    its order and loses them AND every example with a validation prompt (generated toys repeat puzzles,
    and a prompt seen in training would make validation a memory test). n = 0: (examples, [])."""
    if n < 0 or n >= len(examples):
        raise ValueError(f"--val-size {n}: must be in [0, {len(examples)}) for {len(examples)} training examples "
                         "(it leaves the rest for training)")
    if n == 0:
        return examples, []
    picked = sorted(random.Random(seed).sample(range(len(examples)), n))  # indices, in the data's order
    val = [examples[i] for i in picked]
    val_prompts = {ex["prompt"] for ex in val}
    return [ex for ex in examples if ex["prompt"] not in val_prompts], val


def read_test_solutions(path, sudoku):
    """The solution grids of a d1-format Sudoku test file (columns Puzzle,Solution), as a set; sudoku: its
    record (tasks.TASKS["sudoku"])."""
    return {ex["solution"] for ex in sudoku.read_examples(path)}


def add_protocol_flags(parser):
    """grpo.py's flags of the honest protocol, and --eval-every's, which it changes."""
    p = parser.add_argument_group("the honest protocol: train / validation / test (docs/evaluation.md)")
    p.add_argument("--sudoku-split", type=str, default="d1", choices=["d1", "solution"], help="d1: d1's Sudoku "
                   "training data as is; solution: split by solution grid, drop the training puzzles whose grid is in "
                   "--sudoku-test (4x4 Sudoku has only 288 grids)")
    p.add_argument("--sudoku-test", type=str, default="", help="the Sudoku test file whose solutions "
                   "--sudoku-split solution keeps out of training (d1: 4x4_test_sudoku.csv); default: none")
    p.add_argument("--val-size", type=int, default=0, help="validation items carved from the training data "
                   "(seed --data-seed), after the Sudoku split; 0 = none")
    p.add_argument("--eval-every", type=int, default=0, help="every N rounds (and at round 0 and the last): greedy "
                   "accuracy on the validation split (val_acc in metrics.jsonl); the best round is saved and named "
                   "in <out-dir>/best.json; needs --val-size (or --test-curve); 0 = off")
    p.add_argument("--val-gen-length", type=int, default=0, help="gen length of the validation eval (0 = the "
                   "rollout canvas --gen-length; toys: their eval canvas)")
    p.add_argument("--test-curve", action="store_true", help="a generated toy: also log heldout_acc on the TEST "
                   "set (and train_acc on new training-side items) every --eval-every rounds: a study's view of the "
                   "test set, never used to select anything")
    p.add_argument("--eval-items", type=int, default=200, help="--test-curve: test items per curve point")


def check_protocol_flags(args, registry):
    """The protocol flags that cannot work, as one-line ValueErrors (registry: tasks.TASKS)."""
    tasks_named, generated = args.task.split(","), [name for name, t in registry.items() if t.make]
    if args.sudoku_split == "solution" and not args.sudoku_test:
        raise ValueError("--sudoku-split solution needs --sudoku-test PATH (the test file whose solution grids "
                         "leave the training data)")
    if args.sudoku_split == "solution" and "sudoku" not in tasks_named:
        raise ValueError(f"--sudoku-split solution: --task {args.task} has no sudoku task to split")
    for flag in ("val_size", "eval_every", "val_gen_length"):
        if getattr(args, flag) < 0:
            raise ValueError(f"--{flag.replace('_', '-')} must be >= 0, got {getattr(args, flag)}")
    if args.val_gen_length and not (args.val_gen_length <= 16 or args.val_gen_length % 32 == 0):
        raise ValueError(f"--val-gen-length {args.val_gen_length}: must be at most 16 or a multiple of 32 (eval.py's "
                         "blocks of 32, the toys' of 16)")
    if args.eval_every and not (args.val_size or args.test_curve):
        raise ValueError("--eval-every measures the validation split: give --val-size N (items carved from the "
                         "training data), or --test-curve for a toy's test-set study curve")
    toy = len(tasks_named) == 1 and tasks_named[0] in generated
    if args.test_curve and not (args.eval_every and toy):
        raise ValueError(f"--test-curve draws a generated toy's test-set curve (--task one of "
                         f"{', '.join(generated)}) every --eval-every N rounds: give both")


def protocol_split(args, examples, registry):
    """(train, val, info) from load_rl_data's examples (each with its "task"): the Sudoku split of
    --sudoku-split, then --val-size items carved out, the rest enough for a round's --prompts-per-step.
    info: the split's record for the manifests.
    registry: tasks.TASKS."""
    check_protocol_flags(args, registry)
    dropped = None
    if args.sudoku_split == "solution":
        test = read_test_solutions(args.sudoku_test, registry["sudoku"])
        sudoku = [ex for ex in examples if ex["task"] == "sudoku"]
        kept, dropped = sudoku_solution_split(sudoku, test)
        kept_ids = {id(ex) for ex in kept}  # the other tasks' examples stay where d1's shuffle put them
        examples = [ex for ex in examples if ex["task"] != "sudoku" or id(ex) in kept_ids]
        if int(os.environ.get("RANK", 0)) == 0:  # once under torchrun
            print(f"sudoku split solution: dropped {dropped} of {len(sudoku)} training puzzles whose solution grid is "
                  f"in {args.sudoku_test}")
        if not kept:
            raise ValueError(f"--sudoku-split solution: every training puzzle's solution is in {args.sudoku_test}")
    train, val = carve_validation(examples, args.val_size, args.data_seed)
    info = {"sudoku_split": args.sudoku_split,
            "sudoku_test": os.path.abspath(args.sudoku_test) if args.sudoku_test else None,
            "sudoku_dropped": dropped, "val_size": len(val), "val_seed": args.data_seed}
    if args.prompts_per_step > len(train):  # a round takes --prompts-per-step of them
        raise ValueError(f"--prompts-per-step {args.prompts_per_step} is more than the {len(train)} "
                         f"prompts in the data")
    return train, val, info


def recorded_split(model_dir):
    """The split a model was trained with, as its save_info.json records it ({SPLIT_KEYS}), or None
    (no save_info.json: not one of our grpo.py runs, or one from before the protocol)."""
    path = os.path.join(model_dir or "", INFO_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        info = json.load(f)
    return {k: info.get(k) for k in SPLIT_KEYS} if "val_size" in info else None
