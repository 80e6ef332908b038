"""
Is there a signal in one round of diffu-GRPO? The agreement between the policy gradients of
independent rollout batches, for a checkpoint on the toy.

For K independent batches of toy prompts (as grpo.py draws them) × G completions (grpo.py's own
rollout), take the gradient of the objective at its first inner step (ρ = 1, β = 0: for diffu-GRPO the
token mean of -A_i log π(o_ik), d1 Eq. 3) with the objective's likelihood and loss (methods.grpo), and
report the mean pairwise cosine between the K gradients. Near 1: every round pushes the same way. Near 0:
each round's gradient is mostly sampling noise, and Adam's normalised steps random-walk the weights
(docs/findings.md). Averaging b batches shrinks the noise by √b. --task pbe measures the code toy. Every
flag not listed in the parser is the trainer's own (`python -m methods.grpo`'s), so the measured gradient
is that of the run they describe.

Run:  python -m lab.study_signal --model-dir out/toy/seed0/sft          (about a minute on 2 cores)
      python -m lab.study_signal --task pbe --model-dir out/code_toy/seed0/sft
      python -m lab.study_signal --preset testbed --model-dir out/testbed/seed0/sft    (the testbed)
"""
import argparse
import itertools
import json
import os
from contextlib import nullcontext

import torch

import grpo
import methods.grpo
import tasks
from logprob import mask_generator
from modelio.checkpoint import load
from taskdata.data import group_prompts, toy_blanks
from tasks import total_rewards


def mean_pairwise_cosine(grads):
    """Mean cosine over all pairs of a list of (D,) vectors."""
    cos = [(a @ b / (a.norm() * b.norm())).item() for a, b in itertools.combinations(grads, 2)]
    return sum(cos) / len(cos)


def batch_gradient(model, tokenizer, exs, gargs, seed):
    """(flat gradient of the objective of `gargs` at the first inner step, ρ = 1, for one batch of
    exs × G rollouts; mean reward). The batch goes through grpo.py's own functions, the objective's
    plugged in as methods/grpo.py plugs it."""
    eos, G = model.config.eos_token_id, gargs.num_generations
    prompt = group_prompts(tokenizer, exs, G, gargs.max_prompt_length, eos)[0]  # (b, P), G rows per prompt
    objective = methods.grpo.objective_of(gargs)  # the round's objective, hyper-parameters and rollout
    hp = methods.grpo.hyper(gargs, objective)
    do_rollout = methods.grpo.rollout_of(gargs, objective)
    # (b, N); record: the sampler's, with the trace a trajectory objective reads
    completion, record = do_rollout(model, prompt, torch.Generator().manual_seed(seed), nullcontext, hp)
    texts, rows = tokenizer.batch_decode(completion, skip_special_tokens=True), [ex for ex in exs for _ in range(G)]
    # the task's rewards from its record, as grpo.py scores them (a program runs in sandbox/run.py)
    rewards = torch.tensor([r for r, _ in total_rewards(texts, [{**ex, "task": gargs.task} for ex in rows])])
    b = grpo.MicroBatch(0, [], prompt, completion, grpo.completion_mask(completion, eos), None, record,
                        adv=grpo.group_advantages(rewards, G, gargs.scale_std))  # pads attended, as LLaDA
    # the objective's likelihood (d1's: the per-token estimate of --estimator, (b, N)) under mask seed `seed`
    logp = objective.logprobs(model, b, mask_generator(seed, b.index), hp, None)
    # θ_old = θ_ref = θ (the first inner step): ρ = 1, the clip is inactive and the KL has no gradient, so for
    # diffu_grpo this is the plain policy gradient, the token mean of -A_i log π(o_ik) (d1 Eq. 3). SPG reads neither
    b.old = b.ref = [logp.detach()] if torch.is_tensor(logp) else []
    loss, _ = objective.loss(logp, b, 0, hp)
    grads = torch.autograd.grad(loss, [p for p in model.parameters() if p.requires_grad])
    return torch.cat([g.reshape(-1) for g in grads]).double(), rewards.mean().item()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="agreement of RL gradients across rollout batches; every flag "
                                     "not listed here is the trainer's (python -m methods.grpo's: --task, "
                                     "--estimator, --objective, --p-mask, ...)")
    parser.add_argument("--model-dir", type=str, default="out/toy/seed0/sft", help="a toy checkpoint")
    parser.add_argument("--batches", type=int, default=6, help="independent batches K of --prompts-per-step prompts")
    parser.add_argument("--same-prompts", action="store_true", help="every batch rolls out the SAME prompts (new "
                        "samples and masks): separates a prompt-specific signal from sampling noise")
    parser.add_argument("--json", type=str, default="", help="also append the result to this JSON-lines file")
    args, rest = parser.parse_known_args()
    # the trainer's flags and toy preset: prompts per batch, G, the estimator, the objective, the sampler
    gargs = methods.grpo.parse_args(rest)  # a toy's canvas comes from its record in tasks.py
    if args.batches < 2:
        parser.error("--batches must be >= 2: the agreement is between batches")
    if not tasks.get(gargs.task).make:
        parser.error(f"--task must be a generated toy: {', '.join(tasks.names('make'))}")
    model, tokenizer = load(args.model_dir)
    model.eval()  # no dropout: the only randomness is the rollouts' and the masks'
    n = gargs.prompts_per_step
    # items of the training side of the toy's split, as grpo.py draws them (a stream of their own)
    exs = tasks.make_examples(gargs.task, "train", n * args.batches, 777 + gargs.seed, gargs.data_seed,
                              blanks=toy_blanks(gargs.toy_blanks))
    grads, rewards = [], []
    for k in range(args.batches):
        first = 0 if args.same_prompts else k * n
        g, r = batch_gradient(model, tokenizer, exs[first:first + n], gargs, 1000 * gargs.seed + k)
        grads.append(g)
        rewards.append(r)
    # a batch whose every group has equal rewards has no gradient (A = 0): it has no direction to agree with,
    # so the cosine is taken over the others and the count of such batches said beside it
    live = [g for g in grads if g.norm() > 0]
    if len(live) < 2:
        raise SystemExit(f"only {len(live)} of {args.batches} batches had a gradient (the rest: every group's rewards "
                         f"equal): no agreement to measure; give more --batches")
    result = {**vars(args), "grpo_flags": " ".join(rest), "task": gargs.task, "objective": gargs.objective,
              "estimator": gargs.estimator, "p_mask": gargs.p_mask, "toy_blanks": gargs.toy_blanks,
              "seed": gargs.seed, "prompts": n, "group": gargs.num_generations, "reward": sum(rewards) / len(rewards),
              "cosine": mean_pairwise_cosine(live), "no_gradient_batches": len(grads) - len(live)}
    print(f"{args.model_dir} ({gargs.objective}, {gargs.estimator}, p_mask {gargs.p_mask}): mean reward "
          f"{result['reward']:.3f}, mean cosine between the gradients of {len(live)} independent batches "
          f"{result['cosine']:+.3f} ({len(grads) - len(live)} of {args.batches} had no gradient: all groups' rewards "
          f"equal)")
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "a") as f:
            f.write(json.dumps(result) + "\n")
