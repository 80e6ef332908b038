"""
How good is each likelihood estimator? d1's (logprob.py), those of methods/estimators.py, and the likelihood of
every objective of methods/ (JustGRPO's AR order, the trajectory in N segments, SPG's bounds and its
objective's choice between them, ESPO's coupled ELBO), measured against exact.py's exact values on toy
(prompt, completion) pairs sampled from the trained toy model and from a random one, with each estimator's
cost (forward rows per estimate). docs/findings.md "How good is each likelihood estimator?" describes the
pairs (the last N of 16 tokens scored exactly, the rest revealed context) and the columns: bias, sd, rmse and
rank of one estimate against the exact log p(o|q) (nats per sequence), and the cosines of its gradient with
the exact one's, per sequence and for the group objective at ρ = 1, β = 0 (Σ_i A_i ∇ℓ_i). The references: the
exact ELBO, and SPG's exact EUBO with the share of pairs where it falls below log p. JustGRPO's AR likelihood
is checked against a plain loop on every pair. The trajectory rows score the last N tokens with the first
16 - N as context from the start (an approximation: in the rollout some of them were written later).

Run:  python -m lab.study_estimators     (needs out/toy/seed0/grpo: `bash lab/runs/toy.sh 0`, or `make lab-estimators`)
      writes out/study/estimators.json and prints the table
"""
import argparse
import json
import os
import time
from contextlib import nullcontext
from types import SimpleNamespace

import torch
from tqdm import tqdm

import methods.grpo
from lab.exact import conditional_table, exact_elbo, exact_eubo, exact_logprob
from modelio.checkpoint import load, make_tiny
from taskdata.puzzles import make_toy, split_grids
from modelio.tokenizer import prompt_ids
from logprob import one_step_logprobs
from methods.estimators import coupled_logprobs, elbo_token_logprobs
from methods.espo import coupled_elbo
from methods.justgrpo import ar_logprobs
from methods.spg import block_logprobs, bounds
from methods.trajectory import stepmerge_logprobs
from rewards import toy_reward

# name -> (the sequence log-likelihood estimate of one pair, a scalar with its graph, forward rows per estimate);
# `p` is a pair (sample_pairs), `g` a torch.Generator. d1's estimators and the field's likelihoods of methods/
ESTIMATORS = {
    "one-step, p_mask 0": (lambda m, p, g: one_step_logprobs(m, p.q, p.o, p_mask_prompt=0.0, generator=g).sum(), 1),
    "one-step, p_mask 0.15 (d1)": (
        lambda m, p, g: one_step_logprobs(m, p.q, p.o, p_mask_prompt=0.15, generator=g).sum(), 1),
    "coupled (DiffuCoder), p_mask 0": (
        lambda m, p, g: coupled_logprobs(m, p.q, p.o, p_mask_prompt=0.0, generator=g).sum(), 2),
    "MC ELBO, k = 1": (lambda m, p, g: elbo_token_logprobs(m, p.q, p.o, k=1, generator=g).sum(), 1),
    "MC ELBO, k = 4": (lambda m, p, g: elbo_token_logprobs(m, p.q, p.o, k=4, generator=g).sum(), 4),
    "MC ELBO, k = 16": (lambda m, p, g: elbo_token_logprobs(m, p.q, p.o, k=16, generator=g).sum(), 16),
    # JustGRPO: the exact likelihood of its own, left-to-right policy; here against the any-order one
    "AR order (JustGRPO)": (lambda m, p, g: ar_logprobs(m, p.q, p.o).sum(), "N"),
    # the trajectory (d2 StepMerge, p_mask 0 as TraceRL): the sampler's 8 steps in N segments
    **{f"trajectory, N = {n}": (lambda m, p, g, n=n: stepmerge_logprobs(m, p.q, p.o, p.commit, TOY_STEPS, n, 0.0,
                                                                         g).sum(), n) for n in (1, 2, 4, 8)},
    # SPG (its settings: 2 block-wise views, blocks of half the scored completion, light masks at 0.15, β 1.5, ω 0.5)
    "SPG ELBO, 2 block views": (lambda m, p, g: spg_bounds(m, p, g)[0], 2),
    "SPG EUBO, β 1.5": (lambda m, p, g: spg_bounds(m, p, g)[1], 2),  # β: SPG_BETA
    "SPG objective (A > 0: ELBO, else ½ EUBO + ½ ELBO)": (
        lambda m, p, g: (lambda e, u: e if p.a > 0 else 0.5 * u + 0.5 * e)(*spg_bounds(m, p, g)), 2),
    "ESPO coupled ELBO, M = 2": (lambda m, p, g: coupled_elbo(m, p.q, p.o, 2, g)[0], 4),
}
TOY_STEPS = 8  # the toy preset's sampler steps (grpo.py --preset tiny)
SPG_BETA = 1.5  # SPG's EUBO order for GSM8K / MATH


def spg_bounds(model, p, g):
    """SPG's (ELBO, EUBO) of one pair, as its objective computes them (methods/spg.py)."""
    N = p.o.shape[1]
    lp, scored = block_logprobs(model, p.q, p.o, torch.tensor([N]), N // 2, 2, 0.15, g)
    elbo, eubo = bounds(lp, scored, torch.tensor([N]), SPG_BETA)
    return elbo[0], eubo[0]


def flat_grad(value, params):
    """∇ value w.r.t. params, flattened to one (D,) fp64 vector."""
    grads = torch.autograd.grad(value, params)
    return torch.cat([g.reshape(-1) for g in grads]).double()  # (D,)


def cosine(a, b):
    return (a @ b / (a.norm() * b.norm() + 1e-30)).item()


def mean_ci(values):
    """(mean, 95 % normal half-width) of a list of floats; the half-width None for 1 value, both None for 0."""
    if not values:
        return None, None
    t = torch.tensor(values, dtype=torch.float64)
    return t.mean().item(), (1.96 * t.std() / len(t) ** 0.5).item() if len(t) > 1 else None


def spearman(x, y):
    """Rank correlation of two (n,) tensors (no ties in continuous values)."""
    rx, ry = x.argsort().argsort().double(), y.argsort().argsort().double()  # (n,) ranks
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return (rx @ ry / (rx.norm() * ry.norm())).item()


# grpo.py's defaults (the tiny preset, d1's exact sampler) with an objective that has the sampler record its trajectory:
# grpo.rollout as methods/grpo.py hands it the recording sampler
TRACE_ARGS = methods.grpo.parse_args(["--objective", "trajectory"])
TRACE_OBJECTIVE = methods.grpo.objective_of(TRACE_ARGS)
TRACE_HP = methods.grpo.hyper(TRACE_ARGS, TRACE_OBJECTIVE)
TRACE_ROLLOUT = methods.grpo.rollout_of(TRACE_ARGS, TRACE_OBJECTIVE)


def sample_pairs(model, tok, exs, G, N, seed):
    """[pair] for G samples per example: q the context ids (1, P'), o the completion ids (1, N), commit the
    sampler steps that wrote o (1, N), r its reward, gi its group, a its advantage (r - the group's mean)."""
    pairs = []
    for gi, ex in enumerate(exs):
        q = torch.tensor(prompt_ids(tok, ex["prompt"]))  # (P,)
        # a rollout as grpo.py's toy preset draws it: (G, 16), with the step each token was written at
        out, record = TRACE_ROLLOUT(model, q.repeat(G, 1), torch.Generator().manual_seed(seed + gi), nullcontext,
                                   TRACE_HP)
        rs = [toy_reward(tok.decode(o, skip_special_tokens=True), ex) for o in out]
        for o, c, r in zip(out, record["commit_step"], rs):
            # the first 16 - N sampled tokens become revealed context, the last N the scored completion
            pairs.append(SimpleNamespace(q=torch.cat([q, o[:-N]])[None], o=o[-N:][None], commit=c[-N:][None], r=r,
                                         gi=gi, a=r - sum(rs) / len(rs)))
    return pairs


def study(model, pairs, draws, seed, names=tuple(ESTIMATORS)):
    """Per estimator in `names`: the metrics described at the top, and the exact values themselves. Each
    estimator draws from its own generator (seeded per pair), so a row is the same whichever others run."""
    params = [p for p in model.parameters() if p.requires_grad]
    exact, elbo, eubo, ar_gap = [], [], [], 0.0
    est = {name: [] for name in names}  # name -> per pair (draws,) values
    cos_seq = {name: [] for name in names}
    group_grads = {}  # group -> {name or "exact": Σ_i A_i ∇ℓ_i}
    for p in tqdm(pairs, desc="pairs", mininterval=5):
        table = conditional_table(model, p.q[0], p.o[0])  # (2^N, N) fp64, with the graph
        ll = exact_logprob(table)
        exact.append(ll.item())
        elbo.append(exact_elbo(table).item())
        eubo.append(exact_eubo(table, SPG_BETA).item())
        g_exact = flat_grad(ll, params)  # (D,)
        gg = group_grads.setdefault(p.gi, {})
        gg["exact"] = gg.get("exact", 0) + p.a * g_exact
        with torch.no_grad():  # JustGRPO's likelihood is exact for its own (AR) policy: against a plain loop
            ar_gap = max(ar_gap, abs(ESTIMATORS["AR order (JustGRPO)"][0](model, p, None).item() - ar_loop(model, p)))
        for name in names:
            fn = ESTIMATORS[name][0]
            g = torch.Generator().manual_seed(seed)
            # draw 0 keeps the graph (the gradient a training step would use); the rest only values
            v0 = fn(model, p, g)
            g_est = flat_grad(v0, params)
            cos_seq[name].append(cosine(g_est, g_exact))
            gg[name] = gg.get(name, 0) + p.a * g_est
            with torch.no_grad():
                rest = [fn(model, p, g).item() for _ in range(draws - 1)]
            est[name].append(torch.tensor([v0.item()] + rest, dtype=torch.float64))
        seed += 1
    exact_t = torch.tensor(exact, dtype=torch.float64)  # (pairs,)
    informative = [gg for gi, gg in group_grads.items() if any(p.a != 0 for p in pairs if p.gi == gi)]
    N = pairs[0].o.shape[1]
    rows = {}
    for name in names:
        cost = ESTIMATORS[name][1]
        e = torch.stack(est[name])  # (pairs, draws)
        err = e - exact_t[:, None]
        rows[name] = {
            "rows": N if cost == "N" else cost,
            "bias": err.mean().item(),
            "sd": e.var(dim=1).mean().sqrt().item() if e.shape[1] > 1 else 0.0,
            "rmse": err.pow(2).mean().sqrt().item(),
            "rank": sum(spearman(e[:, d], exact_t) for d in range(e.shape[1])) / e.shape[1],
            # means over pairs / groups with a 95 % half-width: one draw per pair is what a training step sees
            "cos_seq": mean_ci(cos_seq[name])[0], "cos_seq_ci": mean_ci(cos_seq[name])[1],
            "cos_grpo": mean_ci([cosine(gg[name], gg["exact"]) for gg in informative])[0],
            "cos_grpo_ci": mean_ci([cosine(gg[name], gg["exact"]) for gg in informative])[1],
            "groups_with_signal": len(informative),
        }
    # the exact ELBO (the bias every MC ELBO estimate inherits) and SPG's exact EUBO, at 2^N - 1 rows each
    for name, values in (("exact ELBO (reference)", elbo), (f"exact EUBO, β {SPG_BETA} (reference)", eubo)):
        v = torch.tensor(values, dtype=torch.float64)
        rows[name] = {"rows": 2 ** N - 1, "bias": (v - exact_t).mean().item(), "sd": 0.0,
                      "rmse": (v - exact_t).pow(2).mean().sqrt().item(), "rank": spearman(v, exact_t),
                      "cos_seq": None, "cos_seq_ci": None, "cos_grpo": None, "cos_grpo_ci": None,
                      "groups_with_signal": None}
    # does the upper bound SPG trains with lie above log p?
    rows[f"exact EUBO, β {SPG_BETA} (reference)"]["below_logp"] = \
        (torch.tensor(eubo, dtype=torch.float64) < exact_t).double().mean().item()
    return rows, exact, elbo, ar_gap


def ar_loop(model, p):
    """Σ_t log p(o_t | q, o_<t, M...) of one pair by a plain loop: one full forward per position."""
    mask_id, (P, N), total = model.config.mask_token_id, (p.q.shape[1], p.o.shape[1]), 0.0
    for t in range(N):
        x = torch.cat([p.q[0], p.o[0, :t], torch.full((N - t,), mask_id)])[None]
        total += torch.log_softmax(model(x)[0, P + t].double(), -1)[p.o[0, t]].item()
    return total


def fmt(v, ci, n=None):
    """'0.66 ± 0.16', with the number of groups behind a diffu-GRPO cosine when given."""
    if v is None:
        return "—"
    return (f"{v:.2f}" if ci is None else f"{v:.2f} ± {ci:.2f}") + ("" if n is None else f" ({n} groups)")


def table_markdown(results):
    lines = ["| model | estimator | rows | bias | sd | rmse | rank corr. | cos ∇ seq (95 % CI) | cos ∇ group objective (95 % CI) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for model_name, res in results.items():
        for name, r in res["estimators"].items():
            below = f" (below log p on {100 * r['below_logp']:.0f} % of pairs)" if "below_logp" in r else ""
            lines.append(f"| {model_name} | {name}{below} | {r['rows']} | {r['bias']:+.3f} | {r['sd']:.3f} | {r['rmse']:.3f} "
                         f"| {r['rank']:.3f} | {fmt(r['cos_seq'], r['cos_seq_ci'])} "
                         f"| {fmt(r['cos_grpo'], r['cos_grpo_ci'], r['groups_with_signal'])} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="likelihood estimators vs exact values on the toy")
    parser.add_argument("--trained", type=str, default="out/toy/seed0/grpo",
                        help="a trained toy checkpoint (make run / `bash lab/runs/toy.sh 0` writes this one)")
    parser.add_argument("--random-dir", type=str, default="out/study/random-tiny", help="where the random tiny model is written")
    parser.add_argument("--prompts", type=int, default=32, help="toy prompts (groups) per model")
    parser.add_argument("--group", type=int, default=6, help="completions per prompt (G, grpo.py's toy preset)")
    parser.add_argument("--n", type=int, default=8, help="completion tokens scored exactly (2^n - 1 rows per pair)")
    parser.add_argument("--draws", type=int, default=16, help="independent draws of each stochastic estimator per pair")
    parser.add_argument("--seed", type=int, default=0, help="seed of the prompts, rollouts and estimator draws")
    parser.add_argument("--out", type=str, default="out/study/estimators.json", help="results (JSON)")
    parser.add_argument("--models", type=str, default="trained,random", help="comma list: the trained toy, the "
                        "random tiny model, or both")
    parser.add_argument("--only", type=str, default="", help="comma list: only the estimators whose name contains "
                        "one of these (e.g. SPG); the exact references always run. Default: every estimator")
    args = parser.parse_args()
    if not 1 <= args.n <= 12:
        parser.error("--n must be in 1..12: the exact values need 2^n - 1 forward rows per pair")
    names = [n for n in ESTIMATORS if not args.only or any(w.strip() and w.strip() in n for w in args.only.split(","))]
    if not names:
        parser.error(f"--only {args.only!r} matches no estimator; names: {', '.join(ESTIMATORS)}")
    if not os.path.exists(os.path.join(args.trained, "config.json")):
        raise SystemExit(f"no trained toy model in {args.trained}: run `bash lab/runs/toy.sh 0` (a few minutes) "
                         f"or pass --trained")
    torch.manual_seed(args.seed)
    start = time.time()
    make_tiny(args.random_dir, seed=args.seed)
    train_grids, _ = split_grids()  # the grids SFT and diffu-GRPO train on (data seed 0)
    exs = make_toy(train_grids, args.prompts, seed=10_000 + args.seed)
    results = {}
    models = {"trained toy": args.trained, "random": args.random_dir}
    for model_name, path in [(n, p) for n, p in models.items() if n.split()[0] in args.models.split(",")]:
        model, tok = load(path)
        model.eval()  # no dropout; gradients still flow
        pairs = sample_pairs(model, tok, exs, args.group, args.n, args.seed)
        rows, exact, elbo, ar_gap = study(model, pairs, args.draws, args.seed, names)
        results[model_name] = {"checkpoint": path, "pairs": len(pairs), "exact_logp": exact, "exact_elbo": elbo,
                               "mean_reward": sum(p.r for p in pairs) / len(pairs), "estimators": rows,
                               "ar_vs_loop_max_abs": ar_gap}
        print(f"{model_name}: {len(pairs)} pairs, mean exact log p {sum(exact) / len(exact):.3f}, "
              f"mean reward {results[model_name]['mean_reward']:.3f}; JustGRPO's AR likelihood against a plain "
              f"loop (its own policy's exact value): max |difference| {ar_gap:.1e}")
    out = {"args": vars(args), "seconds": time.time() - start, "results": results}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(table_markdown(results))
    print(f"wrote {args.out} in {out['seconds']:.0f} s")
