"""
lab/cost.py: the analytic cost of one diffu-GRPO round, from its flags (methods.grpo.parse_args): the model
calls of each phase (analytic_passes) and the rows each scoring sends through the model (scoring_cost).
lab/bench.py counts the real calls beside these. Each call is ONE batched forward over all b completions:

  rollout      steps forwards          d1's sampler: one forward per denoising step (a --rollout-cache
                                       narrows its calls; a --rollout-threshold may end blocks early)
  old log-probs  μ forwards            one per mask seed, no grad (grpo.py step 4), if the objective
                                       reads them (wd1 does not); once when its likelihood draws no mask
  ref log-probs  μ forwards if β > 0   reference = LoRA off, or a frozen copy; skipped when β = 0 or
                                       when the objective has no KL term
  policy       μ forward + μ backward  one per inner step, one micro-batch (grpo.py step 5)

An objective of methods/ may score with more calls (calls: JustGRPO's chunks, the trajectory's segments)
and more rows per sequence (rows: the coupled and ELBO estimators 2, SPG m, ESPO 2M, JustGRPO N).

    from lab.cost import analytic_passes
    analytic_passes(methods.grpo.parse_args(["--preset", "8b", "--task", "gsm8k"]))  # {'rollout_fwd': 128, ...}
"""
import argparse

import methods.grpo
from methods.estimators import ESTIMATOR_ROWS
from ops.trainers import CPU_PRESETS


def scoring_cost(args):
    """(forward rows per scored sequence, model calls per micro-batch) of one scoring (θ, θ_old or θ_ref of a
    micro-batch) under the round's flags: d1's one batched forward of --estimator's rows, or the objective's own."""
    obj = methods.grpo.objective_of(args)
    hp = methods.grpo.hyper(args, obj)
    return (obj.rows(hp) if obj.rows else ESTIMATOR_ROWS[args.estimator]), (obj.calls(hp) if obj.calls else 1)


def analytic_passes(args):
    """Model calls of one round (one rollout + μ inner steps, one micro-batch), from the round's flags."""
    obj = methods.grpo.objective_of(args)
    hp = methods.grpo.hyper(args, obj)
    mu, calls = hp.mu, scoring_cost(args)[1]
    scorings = mu if obj.seeded else 1  # old / ref: once per mask seed, or once when the likelihood draws no mask
    return {"rollout_fwd": hp.steps, "old_fwd": scorings * calls if obj.needs_old else 0,
            "ref_fwd": scorings * calls if obj.needs_ref and hp.beta > 0 else 0,
            "policy_fwd": mu * calls, "policy_bwd": mu * calls}


def round_cost(args, rows):
    """One round's cost in sequences through the model, over `rows` completions (all ranks): each rollout
    call times the rows, and each scoring (old, ref, policy) times the rows it runs per sequence."""
    calls, (scoring_rows, scoring_calls) = analytic_passes(args), scoring_cost(args)
    scorings = (calls["old_fwd"] + calls["ref_fwd"] + calls["policy_fwd"]) / scoring_calls
    return {"fwd_rows": rows * (calls["rollout_fwd"] + scoring_rows * scorings),
            "bwd_rows": rows * scoring_rows * calls["policy_bwd"] / scoring_calls}


def round_flags(rest):
    """The flags of the round to measure (for methods.grpo.parse_args): one group a micro-batch unless given,
    and under a GPU recipe (--preset 8b, ...) without --task d1's GSM8K (its 256-token canvas, the shape of
    every 8B figure in docs/performance.md): a task's lengths are its own, and the default toy's are 16 tokens."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset")
    pre.add_argument("--task")
    known = pre.parse_known_args(rest)[0]
    gsm8k = known.task is None and known.preset not in (None, *CPU_PRESETS)
    return ["--groups-per-micro", "1", *(["--task", "gsm8k"] if gsm8k else []), *rest]
