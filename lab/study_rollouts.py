"""
What a fast rollout does to the groups RL learns from, on one checkpoint, without training: the offline
ablation of the threshold rule in docs/fast-rollouts.md. GRPO's signal is the spread of rewards inside a
group; a sampler that makes siblings alike takes it away. For each rollout mode (exact, dual cache, and
dual + τ under both of methods/sampling.py's THRESHOLD_RULES), the same prompts and noise keys through
grpo.py's own rollout, and per mode (means over --seeds):
  - calls: the sampler's model calls per rollout;
  - distinct: the share of distinct completions in a group (1 = all G differ, 1/G = all equal);
  - zero-spread: the share of groups whose rewards are all equal (no advantage, no gradient);
  - reward: the mean reward;
  - nll: the sampled tokens' mean one-step -log π(o_k | q), no prompt mask: lower is nearer the mode.
Every flag not listed below is the trainer's (`python -m methods.grpo`'s).

Run:  python -m lab.study_rollouts --model-dir out/toy/seed0/grpo
      python -m lab.study_rollouts --preset testbed --model-dir SFT_DIR --thresholds 0.9,0.5
"""
import argparse
import copy
import json
from contextlib import nullcontext

import torch

import grpo
import methods.grpo
import tasks
from modelio.checkpoint import load
from taskdata.data import group_prompts, load_rl_data
from logprob import one_step_logprobs
from ops.metrics import distinct_share
from tasks import total_rewards
from methods.sampling import THRESHOLD_RULES


def modes(thresholds):
    """{name: (rollout cache, threshold, rule)}: exact, dual cache, then dual + τ under each rule."""
    out = {"exact": ("none", 0.0, "certainty"), "dual cache": ("dual", 0.0, "certainty")}
    for t in thresholds:
        out.update({f"dual + τ {t:g} {rule}": ("dual", t, rule) for rule in THRESHOLD_RULES})
    return out


@torch.no_grad()
def group_stats(model, tokenizer, exs, gargs, seed):
    """One rollout of len(exs) prompts x G under gargs' rollout mode -> the figures of one seed."""
    G, eos = gargs.num_generations, model.config.eos_token_id
    prompt = group_prompts(tokenizer, exs, G, gargs.max_prompt_length, eos)[0]  # (b, P), G rows per prompt
    obj = methods.grpo.objective_of(gargs)
    hp = methods.grpo.hyper(gargs, obj)
    do_rollout = methods.grpo.rollout_of(gargs, obj)  # the rollout mode of gargs' flags
    completion, record = do_rollout(model, prompt, torch.Generator().manual_seed(seed), nullcontext, hp)  # (b, N)
    mask = grpo.completion_mask(completion, eos)  # (b, N): up to and including the first EOS
    texts = tokenizer.batch_decode(completion, skip_special_tokens=True)
    rewards = torch.tensor([r for r, _ in total_rewards(texts, [ex for ex in exs for _ in range(G)])])  # (b,)
    logp = one_step_logprobs(model, prompt, completion, p_mask_prompt=0.0)  # (b, N)
    return {"calls": record["model_calls"], "distinct": distinct_share(completion, mask, G),
            "zero_spread": (rewards.view(-1, G).std(dim=1) < 1e-6).float().mean().item(),
            "reward": rewards.mean().item(), "nll": (-(logp * mask).sum() / mask.sum()).item()}


def main(argv=None):
    p = argparse.ArgumentParser(description="group diversity per rollout mode; every other flag is the "
                                "trainer's (python -m methods.grpo's)")
    p.add_argument("--model-dir", type=str, required=True, help="the checkpoint (an SFT or RL model)")
    p.add_argument("--prompts", type=int, default=64, help="prompts (groups of G) per seed")
    p.add_argument("--seeds", type=int, default=3, help="noise seeds; figures are means over them")
    p.add_argument("--thresholds", type=str, default="0.9,0.7,0.5", help="comma list of τ")
    p.add_argument("--json", type=str, default="", help="also write the table here")
    args, rest = p.parse_known_args(argv)
    gargs = methods.grpo.parse_args(["--model-dir", args.model_dir, *rest])
    model, tokenizer = load(args.model_dir)
    model.eval()
    exs = load_rl_data(gargs, tasks.TASKS)[:args.prompts]  # the trainer's first prompts (the toys generate theirs)
    table = {}
    for name, (cache, tau, rule) in modes([float(t) for t in args.thresholds.split(",")]).items():
        g = copy.copy(gargs)
        g.rollout_cache, g.rollout_threshold, g.rollout_threshold_rule = cache, tau, rule
        runs = [group_stats(model, tokenizer, exs, g, seed) for seed in range(args.seeds)]
        table[name] = {k: sum(r[k] for r in runs) / len(runs) for k in runs[0]}
    print(f"{args.model_dir}: {len(exs)} prompts x G {gargs.num_generations}, gen {gargs.gen_length}, block "
          f"{gargs.block_length}, steps {gargs.diffusion_steps}, T {gargs.temperature}, means over {args.seeds} seeds")
    print(f"{'rollout':<28} {'calls':>6} {'distinct':>9} {'zero-spread':>12} {'reward':>7} {'nll':>6}")
    for name, r in table.items():
        print(f"{name:<28} {r['calls']:6.1f} {100 * r['distinct']:8.1f}% {100 * r['zero_spread']:11.1f}% "
              f"{r['reward']:7.3f} {r['nll']:6.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model_dir": args.model_dir, "table": table}, f, indent=2)


if __name__ == "__main__":
    main()
