"""
GDSD: reinforcement learning as Guided Denoiser Self-Distillation (arXiv 2605.29398; code GaryBall/GDSD at
3fb6780, gdsd/trainers/gdsd_trainer_batchll.py): the clipped log-ratio of a denoising likelihood, per
canvas token, regressed onto ψ·A with a squared loss, not a ratio times an advantage.

Likelihood (their `_get_denoise_probs`, reduce_var=True as both their calls pass): for each of M draws
(num_mc), row r masks x_r of its N canvas positions, the counts stratified over the b rows
(`forward_process`: k ~ U{0..N}, x = round(linspace(k, k + (b-1)(N+1)/b, b)) mod (N+1)), each row's
positions shuffled; a second view masks the complement; the prompt is never masked; no 1/t weight:

    S_m(o) = ½ Σ_k log p_θ(o_k | the view of draw m that masks k)     (all N positions, EOS padding included)

Advantages leave-one-out, A_i = r_i - mean_{j≠i} r_j (÷ std + 1e-4 with --scale-std, their scale_rewards):
the round's mean-centred advantage times G / (G - 1), exactly. Loss (compute_loss):

    Δ_im = clamp(S_m(o_i) - S_m^old(o_i), log(1-ε_low), log(1+ε_high))
    L = (1/b) Σ_i Σ_m (Δ_im / N - ψ A_i)²  +  β (1/(b M N)) Σ_i Σ_m ½ (S_m(o_i) - S_m^ref(o_i))²

Deviations (docs/differences.md): masks from a generator keyed by mask seed and micro-batch (their
reseeded global RNG gives the same numbers: tested); fp32 log-probs. Cost per micro-batch and inner
step: old and ref 2M rows a sequence, one call each; policy 2M rows (d1: 1). PRESET: --preset gdsd.
"""
import math

import torch

from logprob import canvas_mask, token_logprobs
from methods.common import Objective, k2, one_token_a_step
from sample import draw_device

# their GSM8K recipe (scripts/run_gdsd_llada_gsm8k.sh over scripts/train_gdsd.yaml): LoRA r 128 / α 64
# (theirs on all seven linears), μ 8, M 2, ψ 10, β 1e-3, ε 4e-4, lr 3e-6, weight decay 0.01, grad norm
# 0.2, G 16 (2 x 8 GPUs), 20 prompts a step (10 x 4 completions a GPU), one token a step at temperature 1,
# prompts up to 400 tokens; their step count unpublished: d1's 700 rounds (docs/differences.md)
PRESET = dict(objective="gdsd", num_generations=16, prompts_per_step=20, groups_per_micro=1,
              num_iterations=8, epsilon=4e-4, beta=1e-3, p_mask=0.0, lr=3e-6, weight_decay=0.01,
              grad_clip=0.2, diffusion_steps=one_token_a_step, temperature=1.0, max_prompt_length=400,
              lora_r=128, lora_alpha=64.0, load_in_4bit=False, rounds=700, gdsd_draws=2, gdsd_psi=10.0)


def forward_masks(b, N, generator=None):
    """One draw of their forward_process for b rows of N canvas positions: (b, N) bool, True = masked
    in the first view, row r masking x_r positions (stratified counts, a random order per row)."""
    device = draw_device(generator, "cpu")
    k = torch.randint(0, N + 1, (), generator=generator, device=device)
    x = torch.round(torch.linspace(float(k), k + (b - 1) * ((N + 1) / b), steps=b)).long() % (N + 1)
    order = torch.arange(N)[None, :] < x[:, None]  # (b, N): the first x_r positions, then shuffled
    rows = [order[i][torch.randperm(N, generator=generator, device=device).cpu()] for i in range(b)]
    return torch.stack(rows)


def denoise_logprobs(model, prompt, completion, draws=1, generator=None, mask_id=None,
                     attention_mask=None):
    """S (b, M): each draw's coupled denoising log-likelihood of the completion, one forward of
    b·2M rows. attention_mask: the prompt's (b, P) key-padding mask, or None."""
    mask_id = model.config.mask_token_id if mask_id is None else mask_id
    b, P = prompt.shape
    N = completion.shape[1]
    masks = [forward_masks(b, N, generator).to(completion.device) for _ in range(draws)]
    views = []
    for m1 in masks:  # view 1 masks m1, view 2 the complement
        views += [torch.where(m1, mask_id, completion), torch.where(m1, completion, mask_id)]
    rows = torch.stack(views, dim=1)  # (b, 2M, N)
    x = torch.cat([prompt[:, None].expand(b, 2 * draws, P), rows], dim=2).reshape(-1, P + N)
    am = canvas_mask(attention_mask, P + N, 2 * draws, interleave=True)  # (b·2M, P+N), or None
    lp = token_logprobs(model(x, attention_mask=am)[:, P:], completion.repeat_interleave(2 * draws, 0))
    scored = torch.stack([v for m1 in masks for v in (m1, ~m1)], dim=1).reshape(-1, N)  # (b·2M, N)
    pairs = (lp * scored).view(b, draws, 2, N).sum(dim=(2, 3))  # (b, M): each token in one view
    return pairs / 2


def leave_one_out(rewards, group_size, scale_std=False, eps=1e-4):
    """A_i = r_i - mean of the other G - 1 rewards of its group; / (std_G + eps) with scale_std."""
    r = rewards.view(-1, group_size)  # (groups, G)
    baseline = (r.sum(dim=1, keepdim=True) - r) / (group_size - 1)
    adv = r - baseline
    if scale_std:
        adv = adv / (r.std(dim=1, keepdim=True) + eps)
    return adv.view(-1)


def gdsd_loss(seq, old, ref, advantages, n_canvas, psi, eps_low, eps_high, beta):
    """seq (b, M) with grad, old / ref (b, M) without (ref None when β = 0); advantages (b,).
    -> (loss, stats)."""
    b, draws = seq.shape
    delta = (seq - old).clamp(math.log(1 - eps_low), math.log(1 + eps_high))  # (b, M)
    loss = ((delta / n_canvas - psi * advantages[:, None]) ** 2).sum() / b
    kl = k2(ref, seq).sum() / (b * draws * n_canvas) if beta else torch.zeros(())
    loss = loss + beta * kl
    with torch.no_grad():
        low = math.log(1 - eps_low)
        high = math.log(1 + eps_high)
        bound = ((seq - old) <= low) | ((seq - old) >= high)  # the clamp holds: no gradient
        stats = {"kl": kl.item(), "clip_frac": bound.float().mean().item(),
                 "delta_mean": (seq - old).mean().item(), "seq_denoise": seq.mean().item()}
    return loss, stats


def add_flags(parser):
    g = parser.add_argument_group("gdsd (methods/gdsd.py)")
    g.add_argument("--gdsd-draws", type=int, default=2, help="M: coupled mask draws per likelihood "
                   "(rows: 2M; their num_mc)")
    g.add_argument("--gdsd-psi", type=float, default=10.0, help="ψ: the advantage's scale in the "
                   "regression target (their GSM8K and MATH recipes: 10)")
    g.add_argument("--gdsd-epsilon-high", type=float, default=0.0, help="ε_high of the log-ratio "
                   "clamp (0: --epsilon, as their epsilon_high None)")


def check(args):
    if args.gdsd_draws < 1 or args.gdsd_psi <= 0 or args.gdsd_epsilon_high < 0:
        raise ValueError(f"--gdsd-draws must be >= 1, --gdsd-psi > 0, --gdsd-epsilon-high >= 0; got "
                         f"{args.gdsd_draws}, {args.gdsd_psi}, {args.gdsd_epsilon_high}")
    if not 0 < args.epsilon < 1:
        raise ValueError(f"--objective gdsd clamps the log-ratio at log(1 - ε): --epsilon must be in "
                         f"(0, 1), got {args.epsilon}")


def loss_of(seq, b, j, hp):
    """The objective's loss of micro-batch b at inner step j. Its leave-one-out advantage is the
    round's mean-centred one (grpo.group_advantages, std-scaled alike) times G / (G - 1): tested."""
    adv = b.adv * (hp.G / (hp.G - 1))
    ref = b.ref[j] if hp.beta else None
    eps_high = hp.own["gdsd_epsilon_high"] or hp.epsilon
    return gdsd_loss(seq, b.old[j], ref, adv, b.completion.shape[1], hp.own["gdsd_psi"], hp.epsilon,
                     eps_high, hp.beta)


def logprobs_of(model, b, generator, hp, mask_id):
    """The objective's likelihood of micro-batch b: denoise_logprobs, (b, M)."""
    return denoise_logprobs(model, b.prompt, b.completion, hp.own["gdsd_draws"], generator, mask_id,
                            b.pad_mask)


def rows(hp):
    return 2 * hp.own["gdsd_draws"]


OBJECTIVE = Objective(loss_of, logprobs=logprobs_of, rows=rows, flags=add_flags,
                      options=("gdsd_draws", "gdsd_psi", "gdsd_epsilon_high"), check=check)
