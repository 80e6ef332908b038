"""
The trainers' data, each behind one call: the labelled examples of masked SFT (load_sft_data) and
their token sequences (encode_sft: [prompt | completion <|eot_id|> | EOS pads], encode_example),
the prompts of diffu-GRPO (load_rl_data) and their rows in a micro-batch (group_prompts). Every
task is its record in tasks.py's registry, which the trainers hand in: read (Task.read_examples: a
file or hub id, a malformed line named file:line), or generated from the training side of its
split, the half that eval.py never draws from.
"""
import random

import torch

from modelio.tokenizer import prompt_ids, special_ids
from taskdata.task import label_lengths

RL_SHUFFLE_SEED = 42  # d1 shuffles its RL prompts with seed 42


def toy_blanks(spec):
    """--toy-blanks "min,max" -> (min, max) blank cells per puzzle, or a ValueError saying what is wrong."""
    try:
        lo, hi = map(int, spec.split(","))
    except ValueError:
        raise ValueError(f"--toy-blanks must be two integers min,max, got {spec!r}") from None
    if not 1 <= lo <= hi <= 16:
        raise ValueError(f"--toy-blanks: need 1 <= min <= max <= 16 blank cells, got {spec!r}")
    return lo, hi


def task_examples(task, path, args, sft_seed=None, **kw):
    """The training examples of one task (its tasks.Task record): read from `path` (a file or hub id), or,
    for a generated toy, --num-examples items from the TRAINING side of its --data-seed split (eval.py draws
    from the other side), drawn with SFT's seed or, for RL, a stream apart (--data-seed + 1)."""
    if task.make:
        seed = args.data_seed + 1 if sft_seed is None else sft_seed
        return task.make_examples("train", args.num_examples, seed, args.data_seed,
                                  blanks=toy_blanks(args.toy_blanks), **kw)
    if not path:
        raise ValueError(f"--task {task.name} needs a file in --data (a file, or a hub dataset id "
                         f"owner/name[:config][:split]; a comma list in --task's order)")
    return task.read_examples(path)


def load_sft_data(args, registry, seed):
    """Examples with `prompt` and `completion`: a generated toy's labelled items (the Sudoku toy's
    labels deliberately incomplete, --toy-unfilled), or a task's file whose record builds completions.
    registry: tasks.TASKS."""
    examples = task_examples(registry[args.task], args.data, args, seed, unfilled=args.toy_unfilled)
    # RL-only tasks (gsm8k, ...) load fine but have no target text to imitate
    missing = [i for i, ex in enumerate(examples) if "completion" not in ex]
    if missing:
        raise ValueError(f"--task {args.task} has no SFT completions (first missing at item {missing[0]}); "
                         f"SFT needs examples with a target completion, e.g. --task s1k")
    return examples


def encode_example(tokenizer, example, max_length, eot_id, eos_id, cut=False):
    """One SFT sequence: (ids (max_length,) list, prompt_length, what was left out: "" | "eot" |
    "cut"). The prompt is the chat-rendered user turn with the assistant header; the answer is
    the completion, <|eot_id|>, then EOS padding up to max_length (d1: padding="max_length"). A
    prompt or completion that does not fit is an error, unless `cut` (d1 cuts s1K at 4096,
    docs/d1.md §5.1): a long trace then loses its end, possibly its <answer> part. A completion
    that fills max_length exactly (the Sudoku toy's 16 digits: 47 + 16 = 63) leaves out only
    the <|eot_id|>, which its 16-token canvas never generates."""
    # The prompt region is the whole user turn plus the assistant header (add_generation_prompt).
    # d1 counts only the user turn + 1 token as prompt, so the rest of its header is "answer"
    # (docs/d1.md §5.1); the header is deterministic, so we spend no loss on it
    prompt = prompt_ids(tokenizer, example["prompt"])  # never cut: too long is an error
    completion = tokenizer(example["completion"], add_special_tokens=False)["input_ids"]
    room = max_length - len(prompt)
    if room <= 0 or (len(completion) > room and not cut):
        raise ValueError(
            f"a {'prompt' if room <= 0 else 'completion'} does not fit --max-length "
            f"{max_length}: prompt {len(prompt)} + completion {len(completion)} = "
            f"{len(prompt) + len(completion)} tokens, + 1 with its end of turn (completion "
            f"{example['completion'][:40]!r}); raise the task's sft_max_length (`python "
            f"tasks.py --lengths` measures it) or --max-length"
            f"{'' if room <= 0 else ', or --cut-labels (d1 cuts s1K at 4096)'}")
    # the answer closes the assistant turn with <|eot_id|>, as d1's
    # apply_chat_template([user, assistant]) renders it; the model has to learn to emit it
    answer = completion + [eot_id]
    left_out = "" if len(answer) <= room else "eot" if len(completion) == room else "cut"
    ids = (prompt + answer)[:max_length]
    # right-pad with EOS (d1: padding="max_length"). The pads are answer positions and are
    # trained on: this is how the model learns to stop and fill the rest of its fixed-length
    # canvas with EOS (docs/llada.md §7)
    return ids + [eos_id] * (max_length - len(ids)), len(prompt), left_out


def encode_sft(tokenizer, config, examples, max_length, cut, source):
    """Every SFT example encoded (encode_example) by its model's tokenizer and config, before any
    weights load, the longest first: the first that does not fit names `source` (the --data file
    or the task), its index, and so a --max-length that would fit them all."""
    eot_id = special_ids(tokenizer, config).eot  # the family's end of turn (LLaDA: <|eot_id|>)
    sizes = [p + c for p, c in label_lengths(tokenizer, examples)]
    encoded = [None] * len(examples)
    for i in sorted(range(len(examples)), key=lambda i: -sizes[i]):
        try:
            encoded[i] = encode_example(tokenizer, examples[i], max_length, eot_id,
                                        config.eos_token_id, cut)
        except ValueError as e:
            raise ValueError(f"{source}, example {i}: {e}") from None
    return encoded


def load_rl_data(args, registry):
    """Examples (each tagged with its `task`) for one or several tasks: `--task gsm8k,math --data
    a.jsonl,b.jsonl` trains d1's unified model. The toys generate unlabelled items from their
    training split: RL needs only the prompt. registry: tasks.TASKS."""
    names, paths = args.task.split(","), args.data.split(",") if args.data else []
    examples = []
    for i, name in enumerate(names):
        exs = task_examples(registry[name], paths[i] if i < len(paths) else "", args)
        # each example carries its task, so a mixed round scores every completion with its own task's rewards
        examples += [{**ex, "task": name} for ex in exs]
    random.Random(RL_SHUFFLE_SEED).shuffle(examples)
    return examples


def pad_left(rows, pad_id):
    """List of id lists -> (B, P) long, left-padded with pad_id."""
    P = max(len(r) for r in rows)
    # left padding keeps each prompt's last token next to the completion canvas. LLaDA's EOS pads are
    # attended, as in d1, which never passes an attention mask (docs/d1.md §1); a family that hides its
    # pads masks them out (real_tokens)
    return torch.tensor([[pad_id] * (P - len(r)) + r for r in rows])


def real_tokens(rows):
    """List of id lists -> (B, P) long, 1 on each row's own tokens and 0 on the left pads pad_left puts before
    them. From the rows' lengths, never by comparing ids with the pad: EOS may be a family's pad, and a
    prompt may hold it. What modelio/families.left_pad_mask hands the forward of a family that hides its
    pads (Family.hide_pads) as its key-padding mask."""
    P = max(len(r) for r in rows)
    lengths = torch.tensor([len(r) for r in rows])  # (B,)
    return (torch.arange(P)[None, :] >= P - lengths[:, None]).long()  # (B, P)


def group_prompts(tokenizer, exs, G, max_prompt_length, pad_id):
    """The prompt rows of one micro-batch: each example's chat-rendered prompt G times, cut from
    the left to max_prompt_length (d1 keeps the last tokens), left-padded.
    -> ((b, P) ids, cut count, (b, P) real_tokens: 0 on the pads)"""
    rows, n_cut = [], 0
    for ex in exs:
        # the uncut length only counts what the cut drops (a warning)
        n_cut += len(prompt_ids(tokenizer, ex["prompt"])) > max_prompt_length
        # keep the LAST max_prompt_length tokens, as d1's prompt_ids[:, -200:] (docs/d1.md §2.4)
        ids = prompt_ids(tokenizer, ex["prompt"], max_length=max_prompt_length)
        rows += [ids] * G  # consecutive G rows share a prompt: one group
    return pad_left(rows, pad_id), n_cut, real_tokens(rows)
