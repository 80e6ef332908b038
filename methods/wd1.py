"""
wd1: weighted policy optimization (Tang et al., arXiv 2507.08838; code xiaohangt/wd1). A ratio-free
objective: per group of G completions of one prompt, with ℓ_i the completion's likelihood (d1's
one-step estimate, summed over its tokens up to the first EOS) and A_i its advantage,

    L = -Σ_i softmax(A)_i ℓ_i + Σ_i softmax(-A)_i ℓ_i

raise the likelihood of the completions that did better than their siblings, weighted by how much
better, and lower that of those that did worse. No importance ratio, no clip, no KL: it reads neither
θ_old nor θ_ref, so a round is the rollout plus μ policy passes (lab/cost.analytic_passes: no old / ref
calls). A group of equal rewards has w_pos = w_neg = 1/G: the two terms cancel, no signal (as in GRPO).
"""
from methods.common import Objective


def wd1_loss(logp, advantages, mask, group_size):
    """logp, mask (B, N); advantages (B,) -> (loss, stats). Summed over a group as wd1 does (one group
    per micro-batch in its scripts), then a mean over the micro-batch's groups."""
    seq_logp = (logp * mask).sum(dim=1).view(-1, group_size)  # (groups, G) ℓ_i, summed, not averaged
    a = advantages.view(-1, group_size)  # (groups, G)
    w_pos, w_neg = a.softmax(dim=1), (-a).softmax(dim=1)  # (groups, G), each row sums to 1
    loss = ((w_neg - w_pos) * seq_logp).sum(dim=1).mean()
    return loss, {"seq_logp": seq_logp.detach().mean().item()}


OBJECTIVE = Objective(lambda logp, b, j, hp: wd1_loss(logp, b.adv, b.mask, hp.G),
                      needs_old=False, needs_ref=False)
