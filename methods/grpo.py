"""
The field's RL entry point: grpo.py's round, unchanged, with another objective, likelihood or
rollout sampler plugged into the three phase functions grpo.train takes (rollout, score_old_ref,
micro_step), and the field's model families registered (methods/dream.py).

    --objective   diffu_grpo (d1's, the default) | wd1 | justgrpo | spg | espo | gdsd | trajectory
    --estimator   one_step (d1's) | coupled | elbo: the per-token likelihood of the objectives that
                  use one (methods/estimators.py)
    --rollout-cache / --rollout-threshold / --rollout-threshold-rule: Fast-dLLM's rollouts
                  (methods/sampling.py, docs/fast-rollouts.md)
    --preset      grpo.py's, and the papers' own: justgrpo, spg, espo, gdsd

An objective is one Objective record (methods/common.py) in OBJECTIVES; its flags join grpo.py's,
its hyper-parameters reach its functions as hp.own[name]. With none of these flags given this runs
exactly grpo.py's d1 round (tested: the same weights).

Run:
    python -m methods.grpo --objective wd1 --model-dir out/sft --out-dir out/grpo-wd1
    torchrun --nproc_per_node=8 -m methods.grpo --preset spg --task gsm8k \\
        --data openai/gsm8k:main:train --model-dir out/sft-s1k --out-dir out/grpo-spg
"""
import functools
from dataclasses import asdict, dataclass, field, replace

import grpo
import methods.dream  # noqa: F401  the Dream family, registered for --model-dir
from methods import espo, estimators, gdsd, justgrpo, sampling, spg, trajectory, wd1
from methods.common import Objective
from ops.checks import require, upfront

D1 = Objective(grpo.d1_loss, logprobs=grpo.one_step)
OBJECTIVES = {"diffu_grpo": D1, "wd1": wd1.OBJECTIVE, "justgrpo": justgrpo.OBJECTIVE,
              "spg": spg.OBJECTIVE, "espo": espo.OBJECTIVE, "gdsd": gdsd.OBJECTIVE,
              "trajectory": replace(D1, **trajectory.LIKELIHOOD)}  # d1's loss, another likelihood
PRESETS = {**grpo.PRESETS, "justgrpo": justgrpo.PRESET, "spg": spg.PRESET, "espo": espo.PRESET,
           "gdsd": gdsd.PRESET}


@dataclass(frozen=True)
class Hyper(grpo.Hyper):
    """grpo.Hyper and the objective's own flags (Objective.options), by name."""
    own: dict = field(default_factory=dict)


def add_flags(parser):
    """The field's flags, added to grpo.py's."""
    g = parser.add_argument_group("the field (methods/)")
    g.add_argument("--objective", type=str, default="diffu_grpo", choices=sorted(OBJECTIVES),
                   help="step 5's loss: diffu_grpo (d1) or one of methods/ (docs/objectives.md)")
    g.add_argument("--estimator", type=str, default="one_step", choices=estimators.ESTIMATORS,
                   help="per-token log-probs: one_step (d1's), or methods/estimators.py's")
    sampling.add_rollout_flags(parser)  # Fast-dLLM's rollouts, off by default: d1's sampler
    for add in dict.fromkeys(o.flags for o in OBJECTIVES.values() if o.flags):
        add(parser)


def parse_args(argv=None):
    return grpo.parse_args(argv, PRESETS, add_flags)


def objective_of(args):
    """--objective's record with --estimator's likelihood where it reads d1's (or none)."""
    obj = OBJECTIVES[args.objective]
    if obj.logprobs in (None, grpo.one_step) and args.estimator != "one_step":
        obj = replace(obj, logprobs=estimators.likelihood(args.estimator))
    return replace(obj, logprobs=obj.logprobs or grpo.one_step)


def hyper(args, obj):
    """grpo.hyper's Hyper with the objective's own flags."""
    return Hyper(**asdict(grpo.hyper(args)), own={k: getattr(args, k) for k in obj.options})


def check(args, obj):
    """The field's flags, before grpo.py's own checks: one line each, exit 2."""
    require(0 <= args.rollout_threshold <= 1, f"--rollout-threshold must be 0 (off) or in (0, 1], "
            f"got {args.rollout_threshold}")
    # a threshold rollout's forward count depends on the samples; sharded forwards are collectives
    require(not (args.rollout_threshold and args.fsdp), "--rollout-threshold with --fsdp: the "
            "number of model calls then depends on each rank's samples, and FSDP ranks must make "
            "the same calls; use --rollout-cache alone")
    require(obj.needs_old or not obj.needs_ref, "an objective with a reference pass needs an old one")
    sampling.check_cache_applies(args.model_dir, args.rollout_cache)  # not on shifted logits
    if obj.check is not None:
        obj.check(args)


def rollout_of(args, obj):
    """Step 1: grpo.rollout with the field's sampler where a flag or the objective asks for one
    (its record, with the sampler's own model calls and trace, becomes the micro-batch's)."""
    sampler = sampling.rollout_sampler(args.rollout_cache, args.rollout_threshold,
                                       args.rollout_threshold_rule, record=obj.trace)
    if sampler is None:
        return grpo.rollout

    def do_rollout(model, prompt, generator, amp, hp, attention_mask=None):
        stats = {}  # what the sampler records: its model calls, each token's step and log-prob
        sample = functools.partial(sampler, stats=stats)
        completion, record = grpo.rollout(model, prompt, generator, amp, hp, attention_mask, sample)
        return completion, {**record, **stats}
    return do_rollout


def old_ref_of(obj):
    """Step 4 for the objective: grpo.score_old_ref with its likelihood, once per mask seed (or
    once for all μ steps when it draws no masks); nothing when it needs neither pass."""
    def do_old_ref(model, ref_model, ref_context, batches, seeds, hp, amp):
        if not obj.needs_old:  # wd1, JustGRPO, SPG: no old or reference pass
            return
        scored = hp if obj.needs_ref else replace(hp, beta=0.0)  # beta 0: no reference pass
        grpo.score_old_ref(model, ref_model, ref_context, batches,
                           seeds if obj.seeded else seeds[:1], scored, amp, obj.logprobs)
        if not obj.seeded:  # the same likelihood serves every inner step
            for b in batches:
                b.old = b.old * len(seeds)
                b.ref = b.ref * len(seeds)
    return do_old_ref


def micro_of(obj):
    """Step 5 on a micro-batch: grpo.micro_step with the objective's likelihood and loss, or its
    own forwards and backwards (policy_pass: JustGRPO's chunks, the trajectory's segments)."""
    if obj.policy_pass is None:
        return functools.partial(grpo.micro_step, logprobs=obj.logprobs, loss=obj.loss)

    def micro(model, b, j, generator, hp, amp, mask_id, accum):
        return obj.policy_pass(model, b, j, generator, hp, mask_id, accum, amp, obj.loss)
    return micro


def main(argv=None):
    args = parse_args(argv)
    obj = objective_of(args)
    with upfront():
        check(args, obj)
    grpo.train(args, hyper(args, obj), rollout_of(args, obj), old_ref_of(obj), micro_of(obj))


if __name__ == "__main__":
    main()
