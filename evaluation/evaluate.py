"""
Generate and score eval items: the part of the evaluation that BOTH eval.py and grpo.py's
--eval-every run, kept below both so that the trainer never imports the evaluator.

What is here: d1's eval prompt as token ids (eval_prompt_ids), the generate-and-score loop
(run_items: left-padded batches, one generator per batch, the task's parser), the accuracy d1
reports (accuracy), and the toys' test-set study curve of grpo.py --test-curve (toy_curve_sets,
toy_accuracies), measured with eval.py's toy protocol, so the curve's last point is the
number eval.py prints for the saved model. The validation curve is evaluation/validation.py's;
eval_schedule is the sampler's schedule both take from eval.py's protocol.

Used as:
    from evaluation.evaluate import run_items, accuracy                  # eval.py, evaluation/validation.py
"""

import torch

import tasks
from modelio.tokenizer import prompt_ids
from ops.metrics import progress
from methods import sampling
from sample import REMASKING_STRATEGIES, generate

# the example fields the eval parsers read: they travel with every record, so --rescore needs no data file
SCORING_FIELDS = ("answer", "nums", "target", "puzzle", "solution", "tests", "program_prefix", "unit_tests")
CURVE_SEED = 54_321  # the curve's training-side items: a stream apart from SFT's and RL's



def eval_schedule(task, gen):
    """d1's eval sampler at gen length `gen` (docs/d1.md §8.1) as the task's record adapts it: (block,
    steps, prompts per batch). Block 32, or the task's own (a canvas shorter than a block is one block);
    two tokens unmasked per step; 8 prompts per batch and 4 at gen length 512, or the task's own (the
    toys: 100). The batch is part of the protocol: it decides which pads an item attends to."""
    t = tasks.get(task)
    return min(t.block or 32, gen), gen // 2, t.eval_batch or (4 if gen >= 512 else 8)


# -----------------------------------------------------------------------------
# the toys' test-set study curve (grpo.py --test-curve)


def toy_curve_sets(task="toy", n=200, data_seed=0):
    """The two item sets of grpo.py --test-curve: {"heldout_acc": eval.py's held-out
    items, "train_acc": n new items of the TRAINING side of the split} (for the Sudoku toy, new puzzles
    of the training grids: 4x4 Sudoku has only 288 solution grids, so a model can score there by
    recalling grids it trained on, not by the rule)."""
    return {"heldout_acc": tasks.heldout(task, n=n, data_seed=data_seed),
            "train_acc": list(enumerate(tasks.make_examples(task, "train", n, CURVE_SEED, data_seed)))}


def toy_accuracies(model, tokenizer, sets, task="toy"):
    """{name: accuracy %} for toy item sets, with eval.py's toy protocol: greedy at the task's canvas,
    with eval_schedule's block, steps and batch."""
    gen = tasks.get(task).canvas
    block, steps, batch_size = eval_schedule(task, gen)
    return {name: accuracy(task, run_items(model, tokenizer, task, items, gen, block, steps, batch_size=batch_size))
            for name, items in sets.items()}


# -----------------------------------------------------------------------------
# prompts, generation, scoring


def eval_prompt_ids(tokenizer, task, example):
    """d1's eval prompt as token ids: chat template + "<reasoning>" prefill (the toy: its bare prompt)."""
    # NOT the RL prompt: d1's eval asks for \boxed{} answers on GSM8K and Countdown, which RL trained with
    # bare <answer> tags (docs/d1.md §8.2, §10.8)
    return prompt_ids(tokenizer, tasks.eval_message(task, example), prefill=tasks.eval_prefill(task))


@torch.no_grad()
def run_items(model, tokenizer, task, items, gen_length, block_length, steps, temperature=0.0,
              remasking="low_confidence", batch_size=8, seed=0, show_progress=False, cache=None, threshold=None,
              skip=0, on_batch=None):
    """Generate and score `items` [(id, example)] -> list of per-item records. Batches of
    left-padded prompts with EOS as the pad (attended, as in d1: results depend slightly on the
    batch composition, which the manifest records). cache / threshold: the
    approximate Fast-dLLM options (methods/sampling.py; None = the exact sampler, d1's). skip: the first `skip` items
    are done already (a resume; a multiple of batch_size), so the later batches keep their items
    and their generators. show_progress: draw a bar (rank 0). on_batch(records): called after each
    batch (eval.py appends it to disk)."""
    model.eval()
    device = next(model.parameters()).device
    # EOS 126081 is LLaDA's pad, as in d1's padding="longest", padding_side="left" (docs/d1.md §2.4)
    eos = model.config.eos_token_id
    records = []
    for i in progress(range(skip, len(items), batch_size), show_progress, desc=f"{task} {gen_length}"):
        # consecutive items of this rank's stride, as d1's unshuffled sampler batches them: at d1's world size
        # and batch size every batch holds the same items as d1's, so even the attended pads match
        batch = items[i:i + batch_size]
        rows = [eval_prompt_ids(tokenizer, task, ex) for _, ex in batch]
        P = max(len(r) for r in rows)
        # left-padded, and the pads are attended (no attention mask, as d1), so an item's result can depend on
        # which other prompts share its batch; batch_size goes into the manifest
        prompt = torch.tensor([[eos] * (P - len(r)) + r for r in rows], device=device)  # (b, P)
        # one generator per batch, keyed by seed and position: reproducible at temperature > 0.
        # On the model's device: CPU-drawn (b, block, V) Gumbel noise would dominate a GPU run
        g = torch.Generator(device=device).manual_seed(seed * 1_000_003 + i)
        # d1 (docs/d1.md §8.1): block 32, steps = N / 2, τ = 0, low_confidence, cfg 0. Deviation: d1's eval sampler
        # runs under fp16 autocast (docs/d1.md §2.2); we run in the weights' own dtype (bf16 on GPU)
        kw = dict(gen_length=gen_length, block_length=block_length, steps=steps, temperature=temperature,
                  remasking=remasking, generator=g)
        if cache is None and threshold is None and remasking in REMASKING_STRATEGIES:
            out = generate(model, prompt, **kw)  # (b, P + gen_length): d1's sampler
        else:  # Fast-dLLM's options or Dream's orders (methods/sampling.py)
            out = sampling.generate(model, prompt, **kw, cache=cache, threshold=threshold)
        # decoded with special tokens kept, as d1 stores them (its parsers cope with them); the toy's
        # verifier reads the text the way the RL reward does, specials stripped
        texts = tokenizer.batch_decode(out[:, P:], skip_special_tokens=tasks.get(task).make is not None)
        batch_records = score_records(task, batch, texts)
        if on_batch is not None:
            on_batch(batch_records)
        records += batch_records
    return records


def score_records(task, items, texts):
    """One record per (id, example) and its generation: d1's lenient eval parsers (boxes first, numeric
    compare; docs/d1.md §8.3), not the RL rewards; the code benchmarks' programs run in the sandbox."""
    records = []
    for (item_id, ex), text, scored in zip(items, texts, tasks.score_eval_batch(task, texts, [ex for _, ex in items])):
        # the fields the parsers need travel with the record, so --rescore needs no data file
        gold = {k: ex[k] for k in SCORING_FIELDS if k in ex}
        records.append({"id": item_id, "prompt": ex["prompt"], "generation": text, "example": gold, **scored})
    return records


def accuracy(task, records):
    """Accuracy in percent: d1's micro-averaged cell score for Sudoku, the solved share otherwise."""
    if not records:
        return float("nan")
    if tasks.get(task).cells:
        # d1's Sudoku number is a micro-average over cells: Σ correct cells / Σ empty cells (docs/d1.md §8.3)
        return 100 * sum(r["cells_correct"] for r in records) / max(1, sum(r["cells_total"] for r in records))
    # d1: 100 x correct / processed, summed over the ranks' files (docs/d1.md §8.1)
    return 100 * sum(bool(r["correct"]) for r in records) / len(records)
