"""CUDA tests: the GPU path against the CPU path (or fp32) on tiny models, one property each.

Marked `cuda` and skipped with the reason on a machine without a CUDA GPU (CI, laptops); run them
with `pytest -m cuda tests/test_cuda.py` or as the first check of `make gpu-check`. Each compares
the GPU result with an independent computation: the same weights on CPU in fp32, or the
dequantized bf16 model for the 4-bit one. Tolerances are stated beside each assert.
"""
import pytest
import torch

from grpo import completion_mask, group_advantages, grpo_loss
from modelio.adapters import add_lora, dense_weight, lora_state_dict, quantize_blocks
from modelio.checkpoint import from_pretrained, save_pretrained
from logprob import mask_generator, one_step_logprobs
from model import TINY_CONFIG, LLaDA, LLaDAConfig
from sample import generate

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs a CUDA GPU (run `make gpu-check` on a GPU machine)")]

IDS = dict(vocab_size=262, embedding_size=262, eos_token_id=257, pad_token_id=257, mask_token_id=258)
CUDA = "cuda"


def tiny(seed=0, **overrides):
    """A random fp32 tiny LLaDA on CPU (the byte tokenizer's ids)."""
    torch.manual_seed(seed)
    return LLaDA(LLaDAConfig(**{**TINY_CONFIG, **IDS, **overrides})).eval()


def ids(B, T, seed=0, high=256):
    return torch.randint(0, high, (B, T), generator=torch.Generator().manual_seed(seed))


def rel_err(a, b):
    """||a - b|| / ||b|| in fp32."""
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def test_bf16_forward_matches_fp32():
    # bf16 keeps 8 mantissa bits (relative rounding 2^-9 = 0.2 %); through 4 blocks the logits
    # drift by about 1 %. Tolerance: 3 % relative (Frobenius) and 95 % of greedy argmaxes equal.
    m = tiny().to(CUDA)
    x = ids(4, 64).to(CUDA)
    with torch.no_grad():
        ref = m(x)  # (B, T, V) fp32 on CUDA
        out = m.to(torch.bfloat16)(x)  # same weights, rounded to bf16
    assert out.dtype == torch.bfloat16
    assert rel_err(out, ref) < 0.03
    assert (out.argmax(-1) == ref.argmax(-1)).float().mean().item() > 0.95


def test_nf4_forward_and_lora_grad_match_dequantized_bf16():
    # The NF4 model and a bf16 model holding exactly the dequantized weights compute the same
    # function (both in bf16): they differ only by bitsandbytes' kernel order. Tolerance 1 %.
    torch.manual_seed(0)
    q = quantize_blocks(tiny().to(torch.bfloat16).to(CUDA))
    d = tiny().to(torch.bfloat16).to(CUDA)
    with torch.no_grad():
        for bq, bd in zip(q.transformer.blocks, d.transformer.blocks):
            for name in ("q_proj", "k_proj", "v_proj", "attn_out", "ff_proj", "up_proj", "ff_out"):
                getattr(bd, name).weight.copy_(dense_weight(getattr(bq, name)))
        d.load_state_dict({k: v for k, v in q.state_dict().items() if "blocks" not in k}, strict=False)
    x = ids(2, 48).to(CUDA)
    with torch.no_grad():
        assert rel_err(q(x), d(x)) < 0.01
    # LoRA on both, identical adapters; B made non-zero so gradients reach A as well
    for m in (q, d):
        add_lora(m, r=8, alpha=16.0, dropout=0.0)
    torch.manual_seed(1)
    adapters = {k: torch.randn_like(v) * 0.02 for k, v in lora_state_dict(q).items()}
    q.load_state_dict(adapters, strict=False)
    d.load_state_dict(adapters, strict=False)
    grads = []
    for m in (q, d):
        m.train()
        lp = one_step_logprobs(m, x[:, :32], x[:, 32:], generator=mask_generator(3, 0))  # (B, N)
        lp.mean().backward()
        grads.append({n: p.grad for n, p in m.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) == 2 * 4 * 4  # A, B x 4 targets x 4 blocks
    for n in grads[0]:
        assert rel_err(grads[0][n], grads[1][n]) < 0.02, n


def min_margins(model, prompt, gen_length, block_length, steps):
    """Smallest log-space gap, over every step of a greedy generate, that decides the sample: between
    the best and second-best logit of each masked position of the current block (the mask token
    excluded, as the sampler does), and between the log-confidences of the k-th and (k+1)-th most
    confident such positions (k = tokens written per step). A run far from zero is far from a
    near-tie that rounding could flip. Computed on the model's own device."""
    gaps, mask_id, P = [], model.config.mask_token_id, prompt.shape[1]
    k = block_length * gen_length // (block_length * steps)  # tokens written per step (uniform schedule)

    def hook(module, args, out):
        x = args[0]  # (B, L) the canvas of this step
        for row, logits in zip(x, out.float()):
            first = (row == mask_id).nonzero()[0].item()  # the current block holds the first mask
            b0 = P + (first - P) // block_length * block_length
            cols = b0 + (row[b0:b0 + block_length] == mask_id).nonzero().squeeze(1)
            lg = logits[cols].index_fill(-1, torch.tensor([mask_id], device=x.device), float("-inf"))
            top2 = lg.topk(2, dim=-1).values  # (K, 2)
            gaps.append((top2[:, 0] - top2[:, 1]).min().item())
            logconf = torch.log_softmax(logits[cols], -1).gather(-1, lg.argmax(-1, keepdim=True)).squeeze(1)
            logconf = logconf.sort(descending=True).values  # (K,)
            if len(logconf) > k:
                gaps.append((logconf[k - 1] - logconf[k]).item())

    h = model.register_forward_hook(hook)
    try:
        generate(model, prompt, gen_length=gen_length, block_length=block_length, steps=steps)
    finally:
        h.remove()
    return min(gaps)


def test_greedy_sampler_cuda_equals_cpu():
    # A model without near-ties: a larger init (0.1) spreads the logits, and for this seed and prompt
    # the deciding gaps (min_margins) are >= 1e-3 in log space on CPU, far above fp32's CPU/GPU
    # kernel differences (~1e-6). Then the greedy samples must be identical token for token.
    m = tiny(seed=0, init_std=0.1)
    prompt = ids(3, 20, seed=5)
    kw = dict(gen_length=32, block_length=16, steps=16)
    assert min_margins(m, prompt, **kw) > 1e-4  # the precondition, on CPU (measured: 1.1e-3)
    cpu = generate(m, prompt, **kw)
    gpu = generate(m.to(CUDA), prompt.to(CUDA), **kw).cpu()
    assert torch.equal(cpu, gpu)


def test_one_step_estimator_and_grpo_loss_cuda_equal_cpu():
    # fp32 on both; the prompt masks come from CPU generators, so they are the same masks.
    # Tolerance 1e-4 absolute on log-probs (fp32 reduction order), 1e-4 relative on the gradient.
    m = tiny(seed=2)
    prompt, completion = ids(6, 24, seed=7), ids(6, 16, seed=8)
    completion[0, 5] = m.config.eos_token_id  # a real completion mask, not all ones
    mask = completion_mask(completion, m.config.eos_token_id)
    adv = group_advantages(torch.randn(6, generator=torch.Generator().manual_seed(0)), 6)
    results = []
    for device in ("cpu", CUDA):
        m = m.to(device).train()
        m.zero_grad(set_to_none=True)
        p, c = prompt.to(device), completion.to(device)
        with torch.no_grad():
            old = one_step_logprobs(m, p, c, generator=mask_generator(11, 0)) - 0.05  # a ratio != 1
            ref = one_step_logprobs(m, p, c, generator=mask_generator(11, 0)) + 0.02
        logp = one_step_logprobs(m, p, c, generator=mask_generator(11, 0))  # (B, N)
        loss, _ = grpo_loss(logp, old, ref, adv.to(device), mask.to(device), epsilon=0.5, beta=0.04)
        loss.backward()
        # a copy: .cpu() of a CPU grad is that same tensor, which the next m.to(device) moves to the GPU in place
        grad = m.transformer.blocks[0].q_proj.weight.grad.detach().to("cpu", copy=True)
        results.append((logp.detach().cpu(), loss.item(), grad))
    (lp_c, loss_c, g_c), (lp_g, loss_g, g_g) = results
    assert torch.allclose(lp_c, lp_g, atol=1e-4)
    assert abs(loss_c - loss_g) < 1e-5
    assert rel_err(g_g, g_c) < 1e-4


def test_save_load_round_trip_from_cuda(tmp_path):
    # A bf16 CUDA model with trained-looking LoRA adapters: the saved checkpoint (adapters merged)
    # loads back bit-identical on CPU and on CUDA, and equals merging by hand.
    m = tiny(seed=3).to(torch.bfloat16).to(CUDA)
    add_lora(m, r=4, alpha=8.0, dropout=0.0)
    torch.manual_seed(4)
    m.load_state_dict({k: torch.randn_like(v) * 0.02 for k, v in lora_state_dict(m).items()}, strict=False)
    save_pretrained(m, tmp_path)
    want = m.transformer.blocks[1].q_proj.merged_weight().cpu()  # W + (alpha/r) B A, bf16
    for device in ("cpu", CUDA):
        back = from_pretrained(tmp_path, device=device)
        assert back.transformer.blocks[1].q_proj.weight.dtype == torch.bfloat16
        assert torch.equal(back.transformer.blocks[1].q_proj.weight.cpu(), want)
        assert torch.equal(back.transformer.wte.weight.cpu(), m.transformer.wte.weight.cpu())
