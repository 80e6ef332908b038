"""
The field's methods beside d1, one file each. They import the core (the eight top files and what they
import) and run through their own entry points, which reuse the core's phases and loops, never as a
branch inside d1's functions; the core never imports them:

    python -m methods.grpo     grpo.py's round with --objective NAME (OBJECTIVES), --estimator, the
                               Fast-dLLM rollouts (--rollout-cache / --rollout-threshold), the papers' presets
    python -m methods.eval     eval.py with the field's samplers (--cache / --threshold / Dream's --remasking)
    python -m methods.sft      sft.py with the field's model families (a Dream --model-dir)
    python -m methods.sampling the field's sampler demo
    python -m methods.dream    writes a tiny Dream

    wd1.py          wd1 (arXiv 2507.08838): ratio-free weighted likelihood of d1's one-step estimate
    justgrpo.py     JustGRPO (arXiv 2601.15165): AR rollouts and the exact AR likelihood, N forwards
    spg.py          SPG (arXiv 2510.09541): ELBO for A > 0, EUBO or a mixture for A < 0, block-wise masks
    espo.py         ESPO (arXiv 2512.03759): one clipped sequence ratio of coupled ELBOs, k2 KL
    trajectory.py   d2's StepMerge / TraceRL (arXiv 2509.21474, 2509.06949): the recorded unmasking,
                    scored in N segments of the sampler's steps (N = 1: d1's estimator)
    common.py       Objective, the record an objective is registered as (methods/grpo.py's OBJECTIVES),
                    and the pieces they share: PPO's clipped surrogate, the k2 KL
    estimators.py   DiffuCoder's coupled estimator and LLaDA's Monte-Carlo ELBO (--estimator)
    sampling.py     Fast-dLLM's KV caches and threshold, Dream's decoding orders, the trajectory record
    dream.py        the Dream family (Dream-org/Dream-v0-Instruct-7B) on model.py's generic options
    grpo.py, eval.py, sft.py   the entry points above

Each file opens with its paper, its equations, what it needs from a round (old / reference passes,
the sampler's record) and its cost in forward passes; a deviation from the paper's released code is
said where it happens. docs/objectives.md holds the table of objectives and what was checked.
"""
