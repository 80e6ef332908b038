"""
Is there a signal in one round of diffu-GRPO? The agreement between the policy gradients of
independent rollout batches, for a checkpoint on the toy.

For K independent batches of --prompts toy prompts (from the training grids, as grpo.py draws
them) × G completions (rollouts with grpo.py's own `rollout`), take the gradient of the diffu-GRPO
objective at its first inner step (ρ = 1, β = 0: the token mean of -A_i log π(o_ik), d1 Eq. 3) with
the chosen estimator (logprob.estimate_logprobs), and report the mean pairwise cosine between the K
gradients. If it is near 1, every round pushes the same way and training follows the signal. If
it is near 0, each round's gradient is mostly sampling noise: Adam normalises its steps, so the
weights random-walk at the learning rate, and a model that had nothing consistent left to learn
gets worse (README, "What we measured about d1"). Averaging b batches shrinks the noise by √b,
so the cosine tells how much larger a batch would have to be.

--task pbe measures the same for the code toy (pbe.py: prompts of the training functions, its 48-token
canvas, d1's coding reward run in sandbox.py).

Run:  python study_signal.py --model-dir out/toy/seed0/sft          (about a minute on 2 cores)
      python study_signal.py --task pbe --model-dir out/code_toy/seed0/sft
"""
import argparse
import itertools
import json
import os

import torch

import eval as evaluation
import grpo
from lib import pbe
from lib import puzzles
from lib.checkpoint import load
from logprob import ESTIMATORS, estimate_logprobs
from rewards import coding_rewards, toy_reward


def mean_pairwise_cosine(grads):
    """Mean cosine over all pairs of a list of (D,) vectors."""
    cos = [(a @ b / (a.norm() * b.norm())).item() for a, b in itertools.combinations(grads, 2)]
    return sum(cos) / len(cos)


def batch_gradient(model, tokenizer, exs, G, seed, p_mask, estimator, task="toy"):
    """(flat gradient of the diffu-GRPO objective at ρ = 1 for one batch, mean reward)."""
    eos = model.config.eos_token_id
    prompt, _ = grpo.group_prompts(tokenizer, exs, G, 256, eos)  # (b, P), G rows per prompt
    gen = torch.Generator().manual_seed(seed)
    rows = [ex for ex in exs for _ in range(G)]
    if task == "toy":
        completion = grpo.preset_rollout(model, prompt, gen)  # (b, 16), toy preset
        texts = tokenizer.batch_decode(completion, skip_special_tokens=True)
        rewards = torch.tensor([toy_reward(t, ex) for t, ex in zip(texts, rows)])
    else:  # the code toy's canvas (runs/code_toy.sh: 48 tokens, blocks of 16, 2 per step), the preset's temperature
        n = int(evaluation.TOY_CANVAS["pbe"])
        completion = grpo.rollout(model, prompt, gen, grpo.nullcontext, n, evaluation.TOY_BLOCK["pbe"], n // 2,
                                  grpo.PRESETS["tiny"]["temperature"])  # (b, 48)
        rewards = torch.tensor(coding_rewards(tokenizer.batch_decode(completion, skip_special_tokens=True), rows))
    b = grpo.MicroBatch(0, [], prompt, completion, grpo.completion_mask(completion, eos),
                        adv=grpo.group_advantages(rewards, G))
    logp = estimate_logprobs(model, prompt, completion, estimator, p_mask, grpo.mask_generator(seed, 0))  # (b, N)
    # old = θ itself (ρ = 1): the clip is inactive and the gradient is the plain policy gradient
    loss, _ = grpo.grpo_loss(logp, logp.detach(), None, b.adv, b.mask, 0.5, 0.0)
    grads = torch.autograd.grad(loss, [p for p in model.parameters() if p.requires_grad])
    return torch.cat([g.reshape(-1) for g in grads]).double(), rewards.mean().item()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="agreement of diffu-GRPO gradients across rollout batches")
    parser.add_argument("--model-dir", type=str, default="out/toy/seed0/sft", help="a toy checkpoint")
    parser.add_argument("--task", type=str, default="toy", choices=["toy", "pbe"], help="the Sudoku toy or the code toy")
    parser.add_argument("--batches", type=int, default=6, help="independent batches K")
    parser.add_argument("--prompts", type=int, default=16, help="prompts per batch (grpo.py toy: 16)")
    parser.add_argument("--group", type=int, default=6, help="completions per prompt G")
    parser.add_argument("--p-mask", type=float, default=0.15, help="prompt masking of the estimator")
    parser.add_argument("--estimator", type=str, default="one_step", choices=ESTIMATORS, help="see logprob.estimate_logprobs")
    parser.add_argument("--toy-blanks", type=str, default="2,5", help="min,max blank cells of the prompts (grpo.py's flag)")
    parser.add_argument("--seed", type=int, default=0, help="seed of prompts, rollouts and masks")
    parser.add_argument("--same-prompts", action="store_true", help="every batch rolls out the SAME prompts (new "
                        "samples and masks): separates a prompt-specific signal from sampling noise")
    parser.add_argument("--json", type=str, default="", help="also append the result to this JSON-lines file")
    args = parser.parse_args()
    if args.batches < 2:
        parser.error("--batches must be >= 2: the agreement is between batches")
    model, tokenizer = load(args.model_dir)
    model.eval()  # no dropout: the only randomness is the rollouts' and the masks'
    if args.task == "toy":
        train_grids, _ = puzzles.split_grids()
        exs = puzzles.make_toy(train_grids, args.prompts * args.batches, 777 + args.seed,
                               *map(int, args.toy_blanks.split(",")))
    else:  # the functions grpo.py trains the code toy on
        exs = pbe.make_pbe(pbe.split_classes()[0], args.prompts * args.batches, 777 + args.seed)
    grads, rewards = [], []
    for k in range(args.batches):
        first = 0 if args.same_prompts else k * args.prompts
        g, r = batch_gradient(model, tokenizer, exs[first:first + args.prompts], args.group,
                              1000 * args.seed + k, args.p_mask, args.estimator, args.task)
        grads.append(g)
        rewards.append(r)
    result = {**vars(args), "reward": sum(rewards) / len(rewards), "cosine": mean_pairwise_cosine(grads)}
    print(f"{args.model_dir} ({args.estimator}, p_mask {args.p_mask}): mean reward {result['reward']:.3f}, "
          f"mean cosine between the gradients of {args.batches} independent batches {result['cosine']:+.3f}")
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "a") as f:
            f.write(json.dumps(result) + "\n")
