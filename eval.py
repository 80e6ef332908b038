"""
Evaluation: greedy generation on held-out items, scored by the task's verifier.

This first version serves the CPU pipeline (the toy task) and gives one function, `evaluate`,
that any script can call. d1's protocol (d1-spec §8): zero-shot, greedy (temperature 0),
low-confidence remasking, block 32, steps = gen_length / 2, left-padded batches.

Run:
    python eval.py --model-dir out/toy/seed0/sft                  # toy held-out accuracy
    python eval.py --summarize out/toy                            # the SFT vs SFT+GRPO table of runs/toy.sh
"""
import argparse
import json
import math
import os
import statistics
import time

import torch
from tqdm import tqdm

from model import TINY_DIR, chat_ids, load
from sample import generate

# -----------------------------------------------------------------------------


def toy_test_set(n=200, data_seed=0, seed=12345, blanks=(2, 5)):
    """Held-out toy puzzles: from the test GRIDS of the same split sft.py and grpo.py train on, so
    a test puzzle's solution grid was never seen in training (measures generalisation)."""
    import tasks
    _, test_grids = tasks.split_grids(seed=data_seed)
    return tasks.make_toy(test_grids, n, seed=seed, min_blanks=blanks[0], max_blanks=blanks[1])


@torch.no_grad()
def evaluate(model, tokenizer, examples, task, gen_length, block_length, steps, batch_size=64,
             progress=False):
    """Greedy completions for `examples` -> (accuracy in [0, 1], list of per-item dicts).
    Accuracy is the task's "solved" criterion (toy: every blank cell right)."""
    from rewards import toy_solved
    if task != "toy":
        raise NotImplementedError("this eval.py version scores the toy task; see the README")
    was_training = model.training
    model.eval()
    eos_id = model.config.eos_token_id
    records = []
    for i in tqdm(range(0, len(examples), batch_size), desc="eval", disable=not progress):
        batch = examples[i:i + batch_size]
        rows = [chat_ids(tokenizer, ex["prompt"]) for ex in batch]
        P = max(len(r) for r in rows)
        device = next(model.parameters()).device
        prompt = torch.tensor([[eos_id] * (P - len(r)) + r for r in rows], device=device)  # (b, P) left-padded
        out = generate(model, prompt, gen_length=gen_length, block_length=block_length, steps=steps)
        texts = tokenizer.batch_decode(out[:, P:], skip_special_tokens=True)
        for ex, text in zip(batch, texts):
            records.append({"prompt": ex["prompt"], "generation": text, "answer": ex["answer"],
                            "correct": bool(toy_solved(text, ex))})
    model.train(was_training)
    return sum(r["correct"] for r in records) / len(records), records


def mean_and_spread(values):
    """Mean, sample std and the 95% t-interval half-width of a short list of per-seed numbers."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0, float("nan")
    sd = statistics.stdev(values)
    t975 = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776}.get(n, 1.96 + 2.4 / n)  # Student t, 95%
    return mean, sd, t975 * sd / math.sqrt(n)


def summarize(run_dir):
    """The pipeline's table from <run_dir>/seed*/eval_{sft,grpo}.json: held-out accuracy of SFT and
    of SFT + diffu-GRPO per seed, then mean, std and 95% CI over seeds of each and of the paired
    difference (each seed's GRPO run starts from that seed's SFT checkpoint)."""
    import glob
    rows = []
    for d in sorted(glob.glob(os.path.join(run_dir, "seed*"))):
        with open(os.path.join(d, "eval_sft.json")) as f1, open(os.path.join(d, "eval_grpo.json")) as f2:
            rows.append((os.path.basename(d), 100 * json.load(f1)["accuracy"], 100 * json.load(f2)["accuracy"]))
    if not rows:
        raise FileNotFoundError(f"no {run_dir}/seed*/eval_sft.json results to summarize")
    print(f"\nheld-out accuracy (%), {run_dir}")
    print(f"{'':>8} {'SFT':>7} {'SFT+GRPO':>9} {'gain':>7}")
    for name, sft, grpo in rows:
        print(f"{name:>8} {sft:>7.1f} {grpo:>9.1f} {grpo - sft:>+7.1f}")
    cols = {"SFT": [r[1] for r in rows], "SFT+GRPO": [r[2] for r in rows], "gain": [r[2] - r[1] for r in rows]}
    stats = {k: mean_and_spread(v) for k, v in cols.items()}
    print(f"{'mean':>8} {stats['SFT'][0]:>7.1f} {stats['SFT+GRPO'][0]:>9.1f} {stats['gain'][0]:>+7.1f}")
    print(f"{'std':>8} {stats['SFT'][1]:>7.1f} {stats['SFT+GRPO'][1]:>9.1f} {stats['gain'][1]:>7.1f}")
    print(f"{'95% CI':>8} {stats['SFT'][2]:>7.1f} {stats['SFT+GRPO'][2]:>9.1f} {stats['gain'][2]:>7.1f}  (± half-width, t over seeds)")
    return stats


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="evaluate a model directory on held-out items")
    parser.add_argument("--model-dir", type=str, default=TINY_DIR, help="official-layout model directory")
    parser.add_argument("--task", type=str, default="toy", help="toy (more tasks: see README)")
    parser.add_argument("--num-items", type=int, default=200, help="toy: held-out puzzles")
    parser.add_argument("--data-seed", type=int, default=0, help="toy: grid split seed (as in sft.py / grpo.py)")
    parser.add_argument("--toy-blanks", type=str, default="2,5", help="toy: min,max blank cells per puzzle")
    parser.add_argument("--gen-length", type=int, default=16, help="completion length (toy: the 16 digits)")
    parser.add_argument("--block-length", type=int, default=16, help="semi-AR block length")
    parser.add_argument("--steps", type=int, default=8, help="diffusion steps (d1: gen_length / 2)")
    parser.add_argument("--batch-size", type=int, default=100, help="prompts per generation batch")
    parser.add_argument("--out", type=str, default="", help="write per-item generations (JSONL) here")
    parser.add_argument("--json", type=str, default="", help="write {accuracy, items, settings} here")
    parser.add_argument("--summarize", type=str, default="", help="a run dir with seed*/eval_{sft,grpo}.json: print the table")
    args = parser.parse_args()
    if args.summarize:
        summarize(args.summarize)
        raise SystemExit
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tokenizer = load(args.model_dir, device=device)
    t0 = time.time()
    acc, records = evaluate(model, tokenizer, toy_test_set(args.num_items, args.data_seed, blanks=tuple(map(int, args.toy_blanks.split(',')))), args.task,
                            args.gen_length, args.block_length, args.steps, args.batch_size, progress=True)
    print(f"{args.task}: accuracy {100 * acc:.1f}% on {len(records)} held-out items ({time.time() - t0:.0f}s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**vars(args), "accuracy": acc, "items": len(records)}, f, indent=2)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
