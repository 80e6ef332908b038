"""
SPG: sandwiched policy gradient (Wang et al., arXiv 2510.09541, ICLR 2026; code facebookresearch/SPG
at a1c7120, spg/spg_trainer.py, built on d1). Lowering a LOWER bound does not lower the likelihood, so
SPG raises the ELBO where A > 0 and lowers an evidence UPPER bound (EUBO), or a mixture, where A < 0:

    ℓ_i = ELBO_i                               if A_i > 0
    ℓ_i = ω EUBO_i + (1 - ω) ELBO_i            otherwise  (ω = 1: "SPG w/ EUBO"; 0.5: "w/ Mixture", the paper's best)
    L = -Σ_i A_i ℓ_i / Σ_i L_i                 (REINFORCE: no ratio, no clip, no KL, no old or reference pass)

with A_i = r_i - mean_G r and L_i the completion's length up to and including its first EOS. Both
bounds come from the same m masked views of a completion (m = 2 in their runs), one forward of b·m rows:

    ELBO_i = (1/m) Σ_j (1/t_j) Σ_{k masked in j} log p_θ(o_k | view j),      t_j = n_j / L_i, the view's masked share
    EUBO_i = (L_i / |K|) Σ_{k in K} (1/β) log( (1/m) Σ_j [k masked in j] p_θ(o_k | view j)^β / t_j )

(K: the tokens masked in at least one view; β = 1.5 for GSM8K / MATH, 1 for Sudoku). The EUBO is the
paper's Corollary 1 with its θ-free constant dropped: with every mask enumerated it is a power mean of
order β of the masked conditionals, ≥ the exact ELBO and (the paper's claim, tested on the toy) ≥ log p.

Block-wise masks like semi-AR inference (their forward_process, "block_random"): a view picks a block
of --block-length among those holding completion tokens (their randperm, then mod), leaves the blocks
before it clean, masks k ~ U{1..len} random tokens of it and everything after it; the prompt and the
clean blocks are then masked with probability --p-mask (0.15), scored too; the chosen block's visible
tokens never are. Positions after the first EOS are masked and never scored.
"""
import torch

from logprob import canvas_mask, prompt_mask, token_logprobs
from methods.common import Objective
from sample import draw_device

# their GSM8K run (sbatch + train.yaml): LLaDA-8B-Instruct with no SFT, NF4 base, LoRA r 128 / α 64, G 6 x 16 prompts,
# μ 4, no KL, lr 3e-6, gen 256 / block 32 / 128 steps at T 0.9 (Sudoku 0.3 and β 1.0), m 2, β 1.5, ω 0.5. Their step
# count is not published (checkpoints swept to 6000 steps): d1's 700 rounds
PRESET = dict(objective="spg", num_generations=6, prompts_per_step=16, groups_per_micro=1, num_iterations=4,
              epsilon=0.5, beta=0.0, p_mask=0.15, lr=3e-6, weight_decay=0.1, grad_clip=0.2,
              temperature=0.9, max_prompt_length=200, lora_r=128,
              lora_alpha=64.0, load_in_4bit=True, rounds=700, spg_draws=2, spg_beta=1.5, spg_omega=0.5)


def block_views(prompt, completion, lengths, block, draws, p_mask, mask_id, generator=None):
    """SPG's block-wise masked views: (b, m, P+N) input ids and (b, m, N) bool, the completion tokens
    each view scores (masked and within the first lengths[i] positions). lengths (b,) long, >= 1."""
    (b, P), N = prompt.shape, completion.shape[1]
    gen_device = draw_device(generator, "cpu")
    n_blocks = N // block
    pos = torch.arange(N)
    inputs, scored = [], []
    for i in range(b):
        L = int(lengths[i])
        held = (L - 1) // block + 1  # blocks that hold completion tokens
        perm = torch.randperm(n_blocks, generator=generator, device=gen_device).cpu()
        rows, marks = [], []
        for j in range(draws):
            idx = int(perm[j % n_blocks]) % held  # their perm[j] % cb
            size = min(block, L - block * idx)  # the chosen block's completion tokens
            k = int(torch.randint(1, size + 1, (1,), generator=generator, device=gen_device))
            inner = torch.randperm(size, generator=generator, device=gen_device).cpu()[:k] + block * idx
            masked = pos >= block * idx + size  # everything after the chosen block's completion tokens
            masked[inner] = True  # k random tokens of the block
            # the prompt and the clean blocks BEFORE the chosen one are lightly masked at p_mask (scored where
            # completion), never the chosen block's visible tokens (their is_mask_prompt = ~is_mask & (rand < p))
            light = prompt_mask((1, P + N), p_mask, generator)[0]
            full = torch.cat([light[:P], masked | (light[P:] & (pos < block * idx))])  # (P+N,)
            rows.append(torch.where(full.to(completion.device), mask_id, torch.cat([prompt[i], completion[i]])))
            marks.append(full[P:] & (pos < L))
        inputs.append(torch.stack(rows))
        scored.append(torch.stack(marks))
    return torch.stack(inputs), torch.stack(scored).to(completion.device)  # (b, m, P+N), (b, m, N)


def block_logprobs(model, prompt, completion, lengths, block, draws, p_mask, generator=None, mask_id=None,
                   attention_mask=None):
    """(log-probs (b, m, N) of the completion under each view, which of them each view scores (b, m, N)).
    attention_mask: the prompt's (b, P) key-padding mask (Dream's hidden pads) or None."""
    mask_id = model.config.mask_token_id if mask_id is None else mask_id
    (b, P), N = prompt.shape, completion.shape[1]
    x, scored = block_views(prompt, completion, lengths, block, draws, p_mask, mask_id, generator)
    am = canvas_mask(attention_mask, P + N, draws, interleave=True)  # (b·m, P+N), or None
    lp = token_logprobs(model(x.view(b * draws, P + N), attention_mask=am)[:, P:],
                        completion.repeat_interleave(draws, 0))
    return lp.view(b, draws, N), scored


def bounds(lp, scored, lengths, beta):
    """(ELBO (b,), EUBO (b,)) of SPG, both summed over the L_i tokens (their per-token means times L_i),
    from per-view log-probs lp (b, m, N) and the scored tokens (b, m, N)."""
    m = lp.shape[1]
    L = lengths.to(lp.dtype)[:, None]  # (b, 1)
    t = scored.sum(-1).clamp(min=1) / L  # (b, m) t_j: each view's masked share of the completion
    elbo = ((lp * scored).sum(-1) / t).mean(1)  # (b,) (1/m) Σ_j (1/t_j) Σ_masked log p
    # (1/β) log((1/m) Σ_j [masked] p^β / t_j) per token, in log space; -inf where no view masks the token
    terms = (beta * lp - t.log()[..., None]).masked_fill(~scored, float("-inf"))  # (b, m, N)
    covered = scored.any(1)  # (b, N)
    per_token = (torch.logsumexp(terms, dim=1) - torch.log(torch.tensor(float(m)))) / beta  # (b, N)
    per_token = per_token.masked_fill(~covered, 0.0)
    eubo = per_token.sum(-1) / covered.sum(-1).clamp(min=1) * L[:, 0]  # (b,) mean over covered tokens, times L_i
    return elbo, eubo


def spg_loss(lp, scored, lengths, advantages, beta, omega):
    """-Σ A_i ℓ_i / Σ L_i with ℓ the ELBO where A > 0, else ω EUBO + (1 - ω) ELBO. -> (loss, stats)."""
    elbo, eubo = bounds(lp, scored, lengths, beta)
    neg = omega * eubo + (1 - omega) * elbo
    ell = torch.where(advantages > 0, elbo, neg)  # (b,)
    loss = -(advantages * ell).sum() / lengths.sum().clamp(min=1)
    stats = {"elbo": elbo.detach().mean().item(), "eubo": eubo.detach().mean().item()}
    return loss, stats


def add_flags(parser):
    g = parser.add_argument_group("spg (methods/spg.py)")
    g.add_argument("--spg-draws", type=int, default=2, help="m: block-masked views per likelihood (rows)")
    g.add_argument("--spg-beta", type=float, default=1.5, help="β of the EUBO (>= 1; their GSM8K / MATH 1.5)")
    g.add_argument("--spg-omega", type=float, default=0.5, help="ω: the EUBO's weight for A < 0 (1: EUBO only, "
                   "0: ELBO only)")


def check(args):
    if args.beta:
        raise ValueError(f"--objective spg has no KL term (their code refuses one), got --beta {args.beta}")
    if args.spg_draws < 1 or args.spg_beta < 1 or not 0 <= args.spg_omega <= 1:
        raise ValueError(f"--spg-draws must be >= 1, --spg-beta >= 1 and --spg-omega in [0, 1]; got "
                         f"{args.spg_draws}, {args.spg_beta}, {args.spg_omega}")


def completion_lengths(b):
    """L_i: completion tokens up to and including the first EOS, from the micro-batch's mask (b,)."""
    return b.mask.sum(1).long().clamp(min=1)


OBJECTIVE = Objective(
    lambda out, b, j, hp: spg_loss(*out, completion_lengths(b), b.adv, hp.own["spg_beta"], hp.own["spg_omega"]),
    logprobs=lambda model, b, g, hp, mask_id: block_logprobs(
        model, b.prompt, b.completion, completion_lengths(b), hp.block_length, hp.own["spg_draws"], hp.p_mask, g,
        mask_id, b.pad_mask),
    needs_old=False, needs_ref=False, rows=lambda hp: hp.own["spg_draws"], flags=add_flags,
    options=("spg_draws", "spg_beta", "spg_omega"), check=check)
