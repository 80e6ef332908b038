"""
What the testbed offers RL, measured at a checkpoint BEFORE any RL (docs/testbed.md):

  - pass@1 and pass@k on held-out problems, sampling as the rollouts do (pass@k well above pass@1 is
    room RL can turn into pass@1; Chen et al. 2021's unbiased estimator, 1 - C(n - c, j) / C(n, j));
  - greedy accuracy (eval.py's protocol);
  - prompt_read: how much of what a completion must copy from its prompt it copied right;
  - the share of groups of G samples whose rewards are all equal (no GRPO signal from them);
  - distinct completions per k, and the completion length in tokens (mean, std), EOS excluded.

Run:  python -m lab.study_testbed --model-dir out/testbed/seed0/sft      (about a minute on 2 cores)
"""
import argparse
import json
import math

import torch

import grpo
from lab.testbed_families import FAMILIES, countdown_toy_variant, read_prompt, solved
from modelio.checkpoint import load
from taskdata.data import pad_left
import tasks
from eval import eval_prompt_ids
from logprob import SEED_STRIDE
from rewards import countdown_reward
from sample import generate


def pass_at(n, c, k):
    """Unbiased pass@k from n samples of which c are correct (Chen et al. 2021, Eq. 1)."""
    return 1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


def sample_many(model, tokenizer, items, k, gen, block, steps, temperature, seed=0, batch=96):
    """k completions per item at `temperature` -> list (per item) of k decoded texts and k lengths."""
    eos = model.config.eos_token_id
    rows = [eval_prompt_ids(tokenizer, "countdown_toy", ex) for ex in items for _ in range(k)]
    texts, lengths = [], []
    for i in range(0, len(rows), batch):
        chunk = rows[i:i + batch]
        prompt = pad_left(chunk, eos)  # (b, P), EOS-padded on the left as the rollouts and eval.py do
        P = prompt.shape[1]
        g = torch.Generator().manual_seed(seed * SEED_STRIDE + i)
        out = generate(model, prompt, gen_length=gen, block_length=block, steps=steps, temperature=temperature,
                       generator=g)[:, P:]  # (b, gen)
        texts += tokenizer.batch_decode(out, skip_special_tokens=True)
        # tokens before the first EOS (the canvas is EOS-padded after the answer's <|eot_id|>)
        is_eos = (out == eos).int()
        lengths += torch.where(is_eos.any(1), is_eos.argmax(1), torch.full_like(is_eos[:, 0], gen)).tolist()
    per_item = range(len(items))
    return [texts[j * k:(j + 1) * k] for j in per_item], [lengths[j * k:(j + 1) * k] for j in per_item]


def properties(model, tokenizer, items, k, G, preset, family=""):
    """The testbed's RL-readiness numbers for one model on `items` (see the docstring); family: the one
    behind --task countdown_toy (lab/testbed_families.py), "" for the testbed."""
    gen, block, steps, temp = preset["gen_length"], preset["block_length"], preset["diffusion_steps"], \
        preset["temperature"]
    texts, lengths = sample_many(model, tokenizer, items, k, gen, block, steps, temp)
    # d1's Countdown reward (1 solved, 0.1 formatted, 0); another family: 1 if its answer is right
    score = (lambda t, ex: float(solved(t, ex))) if family else countdown_reward
    rewards = [[score(t, ex) for t in ts] for ts, ex in zip(texts, items)]
    # did the samples copy what they must from the prompt (the failure docs/testbed.md found)
    copied = [read_prompt(family or "countdown", t, ex) for ts, ex in zip(texts, items) for t in ts]
    correct = [sum(r == 1.0 for r in rs) for rs in rewards]
    flat_len = [x for ls in lengths for x in ls]
    mean_len = sum(flat_len) / len(flat_len)
    # groups of G consecutive samples of one problem, as a GRPO round draws them
    groups = [rs[i:i + G] for rs in rewards for i in range(0, k - G + 1, G)]
    greedy, _ = sample_many(model, tokenizer, items, 1, gen, block, steps, 0.0)
    out = {"greedy": 100 * sum(score(ts[0], ex) == 1.0 for ts, ex in zip(greedy, items)) / len(items)}
    ks = sorted(j for j in {1, 2, 4, 8, k} if j <= k)
    out.update({f"pass@{j}": 100 * sum(pass_at(k, c, j) for c in correct) / len(items) for j in ks})
    out.update({"zero_spread_groups": 100 * sum(len(set(g)) == 1 for g in groups) / len(groups),
                "distinct_per_k": sum(len(set(ts)) for ts in texts) / len(items),
                "prompt_read": 100 * sum(copied) / len(copied),
                "len_mean": mean_len, "len_std": (sum((x - mean_len) ** 2 for x in flat_len) / len(flat_len)) ** 0.5})
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="the testbed's RL room at a checkpoint: pass@k, spread, lengths")
    parser.add_argument("--model-dir", type=str, default="out/testbed/seed0/sft", help="checkpoint to measure")
    parser.add_argument("--items", type=int, default=200, help="held-out problems")
    parser.add_argument("--k", type=int, default=12, help="samples per problem (pass@k up to k)")
    parser.add_argument("--group", type=int, default=6, help="G of the zero-spread count (the preset's)")
    parser.add_argument("--temperature", type=float, default=None, help="default: the testbed preset's")
    parser.add_argument("--gen-length", type=int, default=0, help="canvas (default: the preset's 48)")
    parser.add_argument("--family", choices=FAMILIES, default="", help="the family behind countdown_toy "
                        "(lab/testbed_families.py; default: the testbed's own)")
    parser.add_argument("--json", type=str, default="", help="append the result as one JSON line here")
    args = parser.parse_args()
    tasks.TASKS["countdown_toy"] = countdown_toy_variant(args.family)  # the lab hands its maker in
    if args.k < args.group or args.items < 1:
        parser.error(f"--k ({args.k}) must be at least --group ({args.group}) and --items at least 1")
    torch.manual_seed(0)
    preset = dict(grpo.PRESETS["testbed"])
    if args.gen_length:  # the canvas of another family; two tokens per step, as the preset
        preset.update(gen_length=args.gen_length, diffusion_steps=args.gen_length // 2)
    if args.temperature is not None:
        preset["temperature"] = args.temperature
    model, tokenizer = load(args.model_dir)
    model.eval()
    items = [ex for _, ex in tasks.heldout("countdown_toy", n=args.items)]
    with torch.no_grad():
        res = {"model_dir": args.model_dir, "temperature": preset["temperature"], "k": args.k,
               **properties(model, tokenizer, items, args.k, args.group, preset, args.family)}
    print(" ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in res.items()))
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(res) + "\n")
