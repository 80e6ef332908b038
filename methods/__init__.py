"""
The field's methods beside d1, one file each. They build on d1's pieces (model.py, sample.py,
logprob.py) and plug in through grpo.py's seams, never as a branch inside d1's functions: the
objectives through grpo.OBJECTIVES (`--objective NAME`; d1's own loss is written out in grpo.py),
the estimators through `--estimator`, the samplers through `--rollout-cache` / `--rollout-threshold`
(and eval.py's --cache / --threshold / --remasking).

    wd1.py          wd1 (arXiv 2507.08838): ratio-free weighted likelihood of d1's one-step estimate
    justgrpo.py     JustGRPO (arXiv 2601.15165): AR rollouts and the exact AR likelihood, N forwards
    spg.py          SPG (arXiv 2510.09541): ELBO for A > 0, EUBO or a mixture for A < 0, block-wise masks
    espo.py         ESPO (arXiv 2512.03759): one clipped sequence ratio of coupled ELBOs, k2 KL
    trajectory.py   d2's StepMerge / TraceRL (arXiv 2509.21474, 2509.06949): the recorded unmasking,
                    scored in N segments of the sampler's steps (N = 1: d1's estimator)
    common.py       the pieces they share (masked means, the clipped surrogate, k2 / k3 KL) and
                    Objective, the record an objective is registered as
    estimators.py   DiffuCoder's coupled estimator and LLaDA's Monte-Carlo ELBO (--estimator)
    sampling.py     Fast-dLLM's KV caches and threshold, Dream's decoding orders, the trajectory record

Each file opens with its paper, its equations, what it needs from a round (old / reference passes,
the sampler's record) and its cost in forward passes; a deviation from the paper's released code is
said where it happens. docs/objectives.md holds the table of objectives and what was checked.
"""
