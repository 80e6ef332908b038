"""
ESPO: ELBO-based sequence-level policy optimization (Ou et al., arXiv 2512.03759; code ML-GSAI/ESPO at
b5f2dac, espo/espo_trainer.py). The whole completion is one action, and its log-likelihood is LLaDA's
ELBO; the importance ratio is one number per sequence, normalised per token, clipped as in PPO, with
a k2 KL that has no exponential in it.

ELBO with coupled (complementary) masks, M draws (their `_get_elbo`, `forward_process`): for each draw,
sequence r of the micro-batch masks exactly x_r of its N canvas positions, the counts stratified over
the micro-batch's rows (x_r = round(k + r (N+1)/b) mod (N+1), k ~ U{0..N}), and a second row masks the
complement; a masked token's log-prob is weighted by (N+1)/x in the first view and (N+1)/(N-x) in the
second, each token is scored in exactly one of them, and the pair is averaged:

    ELBO(o) = (1/M) Σ_m ½ Σ_k [k masked in view 1] (N+1)/x log p_θ(o_k | view 1) + [else] (N+1)/(N-x) log p_θ(o_k | view 2)

The prompt is never masked; θ, θ_old and θ_ref see the same counts and masks (keyed generator).

Objective, with S = ELBO summed over the N positions of the canvas (their `logits_to_keep`, the EOS
padding included) and A_i = r_i - mean_G r:

    ρ_i = exp((S_θ(o_i) - S_old(o_i)) / N)
    L = (1/b) Σ_i -min(ρ_i A_i, clip(ρ_i, 1-ε, 1+ε) A_i) + β (1/b) Σ_i ½ (S_θ(o_i) - S_ref(o_i))² / N

Deviations from their code (docs/differences.md): advantages mean-centred as in the paper (their code:
leave-one-out, G/(G-1) times larger); counts rounded half up (theirs: torch.round, ties to even).
"""
import torch

from logprob import canvas_mask, token_logprobs
from methods.estimators import random_subsets, stratified_counts
from methods.common import Objective, clipped_surrogate, k2, one_token_a_step
from sample import draw_device

# their GSM8K recipe (recipes/run_gsm8k_llada.sh + train.yaml): LLaDA-8B-Instruct with no SFT, LoRA r 128 / α 64,
# G 6 x 16 prompts, μ 8, M 2, ε 0.2, β 1e-3 (MATH 1e-3, Countdown 3e-3 with ε 0, Sudoku 1e-2), constant lr 3e-6,
# gen 256 / block 32 / 256 steps (one token a step) at temperature 1, prompts up to 400 tokens (d1: 200). Not 4-bit. Their step count
# is not published: d1's 700 rounds. Not matched: their LoRA on all seven linears (train.yaml; d1's four here, as
# for every objective: --lora-targets)
PRESET = dict(objective="espo", num_generations=6, prompts_per_step=16, groups_per_micro=1, num_iterations=8,
              epsilon=0.2, beta=1e-3, p_mask=0.0, lr=3e-6, weight_decay=0.01, grad_clip=0.2,
              diffusion_steps=one_token_a_step, temperature=1.0, max_prompt_length=400, lora_r=128,
              lora_alpha=64.0, load_in_4bit=False, rounds=700, espo_draws=2)


def coupled_counts(b, N, generator=None):
    """(b,) masked counts in {0..N} for one draw, stratified over the b rows of a micro-batch: one shared
    k ~ U{0..N}, row r gets k + r (N+1) / b rounded half up, mod N+1 (uniform for every row)."""
    gen_device = draw_device(generator, "cpu")
    k = int(torch.randint(0, N + 1, (1,), generator=generator, device=gen_device))
    return stratified_counts(k + 1, N + 1, b) - 1  # (b,): LLaDA's counts over {1..N+1}, shifted to {0..N}


def coupled_elbo(model, prompt, completion, draws=2, generator=None, mask_id=None, attention_mask=None):
    """ESPO's sequence ELBO S (b,): `draws` complementary pairs, 2·draws rows per sequence, one forward.
    attention_mask: the prompt's (b, P) key-padding mask (Dream's hidden pads) or None."""
    mask_id = model.config.mask_token_id if mask_id is None else mask_id
    (b, P), N = prompt.shape, completion.shape[1]
    views, weights = [], []
    for _ in range(draws):
        x = coupled_counts(b, N, generator)  # (b,)
        m1 = random_subsets(x, N, generator).to(completion.device)  # (b, N) True = masked in view 1: x_r positions
        views += [torch.where(m1, mask_id, completion), torch.where(m1, completion, mask_id)]
        x = x.to(completion.device, torch.float32)[:, None]  # (b, 1)
        # (N+1)/x where view 1 masks, (N+1)/(N-x) where view 2 does; a weight never meets a 0 count
        w = torch.where(m1, (N + 1) / x.clamp(min=1), (N + 1) / (N - x).clamp(min=1))  # (b, N)
        weights += [w * m1, w * ~m1]
    rows = torch.stack(views, dim=1)  # (b, 2·draws, N)
    x = torch.cat([prompt[:, None].expand(b, 2 * draws, P), rows], dim=2).reshape(-1, P + N)  # (b·2M, P+N)
    am = canvas_mask(attention_mask, P + N, 2 * draws, interleave=True)  # (b·2M, P+N), or None
    lp = token_logprobs(model(x, attention_mask=am)[:, P:], completion.repeat_interleave(2 * draws, 0))  # (b·2M, N)
    w = torch.stack(weights, dim=1).reshape(-1, N)  # (b·2M, N), 0 where the row leaves the token visible
    return (lp * w).view(b, 2 * draws, N).sum(dim=(1, 2)) / (2 * draws)  # (b,): ½ per pair, mean over draws


def espo_loss(seq, old, ref, advantages, n_canvas, epsilon, beta):
    """seq (b,) with grad, old / ref (b,) without (ref None when β = 0); advantages (b,). -> (loss, stats)."""
    ratio = torch.exp((seq - old) / n_canvas)  # (b,) one ratio per sequence, per-token normalised
    per_seq, clipped = clipped_surrogate(ratio, advantages, epsilon)
    loss = per_seq.mean()
    kl = k2(ref, seq).mean() / n_canvas if beta else torch.zeros(())  # their mean_kl: Σ ½Δ² / (b · N)
    loss = loss + beta * kl
    stats = {"kl": kl.item(), "clip_frac": clipped.float().mean().item(), "ratio_mean": ratio.mean().item(),
             "ratio_dev": (ratio - 1).abs().mean().item(), "seq_elbo": seq.detach().mean().item()}
    return loss, stats


def add_flags(parser):
    g = parser.add_argument_group("espo (methods/espo.py)")
    g.add_argument("--espo-draws", type=int, default=2, help="M: complementary mask pairs per ELBO (rows: 2M)")


def check(args):
    if args.espo_draws < 1:
        raise ValueError(f"--espo-draws must be >= 1, got {args.espo_draws}")


OBJECTIVE = Objective(
    lambda seq, b, j, hp: espo_loss(seq, b.old[j], b.ref[j] if hp.beta else None, b.adv,
                                    b.completion.shape[1], hp.epsilon, hp.beta),
    logprobs=lambda model, b, g, hp, mask_id: coupled_elbo(model, b.prompt, b.completion, hp.own["espo_draws"], g,
                                                             mask_id, b.pad_mask),
    rows=lambda hp: 2 * hp.own["espo_draws"], flags=add_flags, options=("espo_draws",), check=check)
