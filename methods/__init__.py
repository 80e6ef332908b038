"""
The RL objectives beside d1's diffu-GRPO, one file each; grpo.py registers every one of them in
grpo.OBJECTIVES, which is where `--objective NAME` looks, and writes d1's own out in full.

    wd1.py          wd1 (arXiv 2507.08838): ratio-free weighted likelihood of d1's one-step estimate
    justgrpo.py     JustGRPO (arXiv 2601.15165): AR rollouts and the exact AR likelihood, N forwards
    spg.py          SPG (arXiv 2510.09541): ELBO for A > 0, EUBO or a mixture for A < 0, block-wise masks
    espo.py         ESPO (arXiv 2512.03759): one clipped sequence ratio of coupled ELBOs, k2 KL
    trajectory.py   d2's StepMerge / TraceRL (arXiv 2509.21474, 2509.06949): the recorded unmasking,
                    scored in N segments of the sampler's steps (N = 1: d1's estimator)
    common.py       the pieces they share (masked means, the clipped surrogate, k2 / k3 KL) and
                    Objective, the record an objective is registered as

Each file opens with its paper, its equations, what it needs from a round (old / reference passes,
the sampler's record) and its cost in forward passes; a deviation from the paper's released code is
said where it happens. docs/objectives.md holds the table of objectives and what was checked.
"""
