"""
The trainers' data, each behind one call: the labelled examples of masked SFT (load_sft_data), the
prompts of diffu-GRPO (load_rl_data) and their rows in a micro-batch (group_prompts). Real tasks are read by tasks.load_task from local files
(a malformed line is named file:line); the CPU toys are generated from their training split, the
half that eval.py never draws from (puzzles.split_grids, pbe.split_classes).
"""
import random

import torch

import tasks
from taskdata import countdown_toy, pbe, puzzles
from modelio.tokenizer import prompt_ids

RL_SHUFFLE_SEED = 42  # d1 shuffles its RL prompts with seed 42


def toy_blanks(spec):
    """--toy-blanks "min,max" -> (min, max) blank cells per puzzle."""
    return tuple(map(int, spec.split(",")))


def load_sft_data(args, seed):
    """Examples with `prompt` and `completion`. The toy task is generated (few labelled puzzles,
    with deliberately incomplete labels); s1K and the other tasks are read from --data."""
    if args.task == "toy":
        train_grids, _ = puzzles.split_grids(seed=args.data_seed)
        examples = puzzles.make_toy(train_grids, args.num_examples, seed, *toy_blanks(args.toy_blanks))
        # the toy's labels are deliberately incomplete (each blank left open with probability --toy-unfilled):
        # imitation alone then leaves blanks open, and it is diffu-GRPO's reward that teaches filling them
        return [puzzles.partial_label(ex, args.toy_unfilled, seed) for ex in examples]
    if args.task == "pbe":
        # the code toy: (shown pairs -> canonical one-line function) for functions of the training classes
        train_classes, _ = pbe.split_classes(seed=args.data_seed)
        return pbe.make_pbe(train_classes, args.num_examples, seed)
    if args.task == "countdown_toy":
        # the testbed: clean labels, one random solution each, from the training number multisets
        train_sets, _ = countdown_toy.split_multisets(seed=args.data_seed)
        return countdown_toy.make_problems(train_sets, args.num_examples, seed)
    if not args.data:
        raise ValueError(f"--task {args.task} needs --data (a file, or a hub dataset id owner/name[:config][:split])")
    examples = tasks.load_task(args.task, args.data)
    # RL-only tasks (gsm8k, ...) load fine but have no target text to imitate
    missing = [i for i, ex in enumerate(examples) if "completion" not in ex]
    if missing:
        raise ValueError(f"--task {args.task} has no SFT completions (first missing at item {missing[0]}); "
                         f"SFT needs examples with a target completion, e.g. --task s1k")
    return examples


def load_rl_data(args):
    """Examples (each tagged with its `task`) for one or several tasks: `--task gsm8k,math --data
    a.jsonl,b.jsonl` trains d1's unified model. The toys generate unlabelled items from their
    training split: RL needs only the prompt, the reward checks the answer."""
    names = args.task.split(",")
    paths = args.data.split(",") if args.data else []
    examples = []
    for i, name in enumerate(names):
        if name == "toy":
            # puzzles of the training grids of the split sft.py uses, never the test grids of eval.py's held-out set
            train_grids, _ = puzzles.split_grids(seed=args.data_seed)
            exs = puzzles.make_toy(train_grids, args.num_examples, args.data_seed + 1, *toy_blanks(args.toy_blanks))
        elif name == "pbe":
            # the code toy: functions of the training classes only (eval.py holds out whole classes)
            train_classes, _ = pbe.split_classes(seed=args.data_seed)
            exs = pbe.make_pbe(train_classes, args.num_examples, args.data_seed + 1)
        elif name == "countdown_toy":
            # the testbed: problems of the training multisets, a stream apart from SFT's (seed + 1)
            train_sets, _ = countdown_toy.split_multisets(seed=args.data_seed)
            exs = countdown_toy.make_problems(train_sets, args.num_examples, args.data_seed + 1)
        elif i < len(paths):
            exs = tasks.load_task(name, paths[i])
        else:
            raise ValueError(f"--task {name} needs a file in --data (comma list, same order as --task)")
        # each example carries its task, so a mixed round scores every completion with its own task's rewards
        examples += [{**ex, "task": name} for ex in exs]
    random.Random(RL_SHUFFLE_SEED).shuffle(examples)
    return examples


def pad_left(rows, pad_id):
    """List of id lists -> (B, P) long, left-padded with pad_id."""
    P = max(len(r) for r in rows)
    # left padding keeps each prompt's last token next to the completion canvas. The pads are EOS and attended,
    # as in d1, which never passes an attention mask (docs/d1.md §1)
    return torch.tensor([[pad_id] * (P - len(r)) + r for r in rows])


def group_prompts(tokenizer, exs, G, max_prompt_length, pad_id):
    """The prompt rows of one micro-batch: each example's chat-rendered prompt G times, cut from
    the left to max_prompt_length (d1 keeps the last tokens), left-padded. -> ((b, P), cut count)"""
    rows, n_cut = [], 0
    for ex in exs:
        # the uncut length only counts what the cut drops (a warning)
        n_cut += len(prompt_ids(tokenizer, ex["prompt"])) > max_prompt_length
        # keep the LAST max_prompt_length tokens, as d1's prompt_ids[:, -200:] (docs/d1.md §2.4)
        ids = prompt_ids(tokenizer, ex["prompt"], max_length=max_prompt_length)
        rows += [ids] * G  # consecutive G rows share a prompt: one group
    return pad_left(rows, pad_id), n_cut
