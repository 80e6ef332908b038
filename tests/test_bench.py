"""lab/bench.py: the counted model calls of one diffu-GRPO round equal the analytic cost model."""
import json

import pytest
import torch

import grpo
import methods.grpo
from lab.cost import analytic_passes, round_cost, round_flags
from model import LLaDA, LLaDAConfig
from lab.bench import bench, main
from lab.rollouts import bench_rollouts, format_rollout_table
from lab.samplers import SAMPLERS, analytic_columns


def micro_model():
    """d_model 32, 1 layer, vocab 64 (EOS 62, mask 63): a round costs milliseconds."""
    torch.manual_seed(0)
    return LLaDA(LLaDAConfig(d_model=32, n_heads=2, n_kv_heads=2, n_layers=1, mlp_hidden_size=64,
                             vocab_size=64, embedding_size=64, eos_token_id=62, pad_token_id=62,
                             mask_token_id=63, max_sequence_length=64))


def passes(*flags):
    """lab/cost.analytic_passes of the round these flags (python -m methods.grpo's) describe, on GSM8K (d1's
    256-token canvas)."""
    return analytic_passes(methods.grpo.parse_args(["--task", "gsm8k", *flags]))


def test_analytic_passes_table():
    d1 = ["--diffusion-steps", "128", "--num-iterations", "12", "--beta", "0.04"]
    assert passes(*d1) == dict(rollout_fwd=128, old_fwd=12, ref_fwd=12, policy_fwd=12, policy_bwd=12)
    assert passes("--diffusion-steps", "8", "--num-iterations", "2", "--beta", "0") == \
        dict(rollout_fwd=8, old_fwd=2, ref_fwd=0, policy_fwd=2, policy_bwd=2)
    assert passes("--diffusion-steps", "4", "--num-iterations", "1", "--beta", "0.1")["ref_fwd"] == 1
    # the objectives of methods/, by hand: wd1 and SPG score neither θ_old nor θ_ref; ESPO as d1; JustGRPO's
    # policy runs gen_length / --ar-chunk calls per inner step and no old pass (the sampler records θ_old); the
    # trajectory scores each of its N segments in a call, for θ_old, θ_ref and the policy
    assert passes(*d1, "--objective", "wd1") == dict(rollout_fwd=128, old_fwd=0, ref_fwd=0, policy_fwd=12,
                                                     policy_bwd=12)
    assert passes(*d1[:4], "--beta", "0", "--objective", "spg")["old_fwd"] == 0
    assert passes(*d1, "--objective", "espo") == passes(*d1)
    assert passes("--preset", "justgrpo", "--ar-chunk", "32") == dict(rollout_fwd=256, old_fwd=0, ref_fwd=0,
                                                                      policy_fwd=8, policy_bwd=8)
    assert passes(*d1, "--objective", "trajectory", "--trajectory-segments", "8") == \
        dict(rollout_fwd=128, old_fwd=96, ref_fwd=96, policy_fwd=96, policy_bwd=96)


def test_round_cost_from_the_flags():
    # 2 prompts x G 3 rows; 4 diffusion steps + 2 seeds x (old, ref, policy) forwards, 2 policy backwards;
    # the coupled estimator runs 2 rows per scored sequence
    flags = ["--num-generations", "3", "--num-iterations", "2", "--diffusion-steps", "4", "--gen-length", "8",
             "--block-length", "8", "--beta", "0.04"]
    assert round_cost(methods.grpo.parse_args(flags), 6) == {"fwd_rows": 6 * (4 + 2 * 3), "bwd_rows": 6 * 2}
    assert round_cost(methods.grpo.parse_args(flags + ["--estimator", "coupled"]), 6) == \
        {"fwd_rows": 6 * (4 + 2 * 2 * 3), "bwd_rows": 2 * 6 * 2}
    assert round_cost(methods.grpo.parse_args(flags + ["--objective", "wd1"]), 6) == \
        {"fwd_rows": 6 * (4 + 2), "bwd_rows": 12}


# full fine-tuning (reference = frozen copy) over the β × μ grid; one LoRA case (reference = adapters
# off, same module, so its forwards must not be counted as old or policy passes)
# the objectives: wd1 reads neither θ_old nor θ_ref, so its round makes no old or ref calls at all, counted
@pytest.mark.parametrize("beta,mu,lora_r,objective", [(0.0, 1, 0, "diffu_grpo"), (0.04, 1, 0, "diffu_grpo"),
                                                      (0.0, 3, 0, "diffu_grpo"), (0.04, 3, 0, "diffu_grpo"),
                                                      (0.04, 2, 4, "diffu_grpo"), (0.04, 2, 0, "wd1"),
                                                      (0.04, 2, 4, "wd1"), (0.0, 2, 0, "justgrpo"), (0.0, 2, 4, "spg"),
                                                      (0.04, 2, 0, "espo"), (0.04, 2, 4, "trajectory"),
                                                      (0.04, 2, 0, "gdsd")])
def test_counted_passes_equal_analytic(beta, mu, lora_r, objective):
    # JustGRPO samples one token per step, so 4 steps, and its likelihood runs in chunks of 3 positions: 2 calls
    sampler = ["--block-length", "1", "--diffusion-steps", "4", "--ar-chunk", "3"] if objective == "justgrpo" else \
        ["--block-length", "2", "--diffusion-steps", "2", "--trajectory-segments", "2"]
    gargs = methods.grpo.parse_args(["--num-generations", "2", "--groups-per-micro", "1", "--gen-length", "4",
                                     *sampler, "--num-iterations", str(mu), "--beta", str(beta), "--lora-r",
                                     str(lora_r), "--objective", objective])
    res = bench(micro_model(), gargs, prompt_len=4, repeats=1)
    assert res["passes"] == analytic_passes(gargs) == res["analytic"]
    if objective == "wd1":  # fewer model calls: only the rollout and the policy's own passes
        assert res["passes"]["old_fwd"] == res["passes"]["ref_fwd"] == 0
        assert sum(res["passes"].values()) == 2 + 2 * mu
    assert res["sampler_tokens_per_s"] > 0 and res["forward_passes_per_sample"] == gargs.diffusion_steps


def run_cli(*argv):
    main(list(argv))


def test_cli_tiny_prints_table(capsys, tmp_path):
    # the tiny preset with small overrides, to stay fast on 2 cores
    run_cli("--preset", "tiny", "--device", "cpu", "--prompt-len", "8", "--gen-length", "4",
            "--block-length", "4", "--diffusion-steps", "2", "--num-iterations", "1", "--num-generations", "2",
            "--json", str(tmp_path / "b.json"))
    out = capsys.readouterr().out
    assert "tokens/s" in out and "passes" in out and "cpu (" in out and "MISMATCH" not in out
    assert (tmp_path / "b.json").exists()


def test_cli_8b_refuses_cpu():
    with pytest.raises(SystemExit) as e:
        run_cli("--preset", "8b", "--device", "cpu")
    assert "GPU" in str(e.value.code)


def test_sampler_table_counts_the_columns_each_sampler_forwards():
    # exact: every step runs the whole canvas (steps x L); prefix: each block's first step runs
    # the canvas, later steps the block + everything right of it; dual: later steps the block only
    from lab.samplers import compare_samplers
    m = micro_model().eval()
    prompt = torch.randint(0, 62, (2, 4), generator=torch.Generator().manual_seed(0))
    rows = compare_samplers(m, prompt, gen_length=12, block_length=4, steps=6, repeats=1)
    L, K, spb = 16, 4, 2
    assert rows["exact"]["columns_per_sample"] == 6 * L
    assert rows["prefix cache"]["columns_per_sample"] == sum(L + (spb - 1) * (L - 4 - b * K) for b in range(3))
    assert rows["dual cache"]["columns_per_sample"] == 3 * (L + (spb - 1) * K)
    assert rows["exact"]["agreement"] == 1.0 and rows["exact"]["speedup"] == 1.0
    assert all(r["model_calls"] <= 6 for r in rows.values())
    # the cost model of lab/samplers.py says the same (exact for the samplers without a threshold)
    for name, kw in SAMPLERS.items():
        bound = analytic_columns(4, 12, 4, 6, kw.get("cache"))
        assert rows[name]["columns_per_sample"] == bound if "threshold" not in kw else \
            rows[name]["columns_per_sample"] <= bound


@pytest.mark.parametrize("cache", ["none", "prefix", "dual"])
def test_a_round_with_a_cached_rollout_counts_the_analytic_calls_and_columns(cache):
    gargs = methods.grpo.parse_args(["--num-generations", "2", "--groups-per-micro", "1", "--gen-length", "8",
                                     "--block-length", "4", "--diffusion-steps", "4", "--num-iterations", "1",
                                     "--rollout-cache", cache])
    res = bench(micro_model(), gargs, prompt_len=4, repeats=2)
    # the cache keeps the number of calls (one per step) and narrows them: by hand, 2 blocks of 2 steps on a
    # 12-column canvas; prefix's second step forwards block + suffix (8, then 4), dual's the block (4)
    assert res["passes"] == analytic_passes(gargs)
    assert res["rollout_columns"] == res["analytic_columns"] == {"none": 48, "prefix": 36, "dual": 32}[cache]


def test_rollout_table_one_round_per_mode():
    gargs = methods.grpo.parse_args(["--num-generations", "2", "--groups-per-micro", "1", "--gen-length", "8",
                                     "--block-length", "4", "--diffusion-steps", "8", "--num-iterations", "1"])
    rows = bench_rollouts(micro_model(), gargs, 4, repeats=1)
    assert list(rows) == list(SAMPLERS)
    assert rows["exact"]["agreement"] == 1.0 and rows["exact"]["round_speedup"] == 1.0
    for name, r in rows.items():
        assert r["calls"] <= r["analytic_calls"] == 8 and r["columns"] <= r["analytic_columns"]
        if "threshold" not in name:  # only a threshold makes the count depend on the samples
            assert (r["calls"], r["columns"]) == (r["analytic_calls"], r["analytic_columns"])
    assert "dual cache + threshold 0.9" in format_rollout_table(rows, "cpu", "test")


def test_activation_probe_extrapolates_to_depth():
    # the memory plan extrapolates a 1- and 2-block measurement to 32 blocks: check it on 3 blocks
    from modelio.adapters import add_lora
    from lab.memplan import probe_activations, saved_bytes
    cfg = micro_model().config
    probe = probe_activations(cfg, batch=2, prompt_len=5, gen_length=6, dtype=torch.float32,
                              lora_r=4, load_in_4bit=False)
    g = torch.Generator().manual_seed(0)
    prompt, completion = torch.randint(0, 62, (2, 5), generator=g), torch.randint(0, 62, (2, 6), generator=g)
    for ckpt in (False, True):
        torch.manual_seed(0)
        m = LLaDA(LLaDAConfig(**{**cfg.to_dict(), "n_layers": 3}))
        add_lora(m, r=4, alpha=64.0, dropout=0.05)
        m.gradient_checkpointing = ckpt
        m.train()
        act = saved_bytes(m, prompt, completion)
        ck = "_ckpt" if ckpt else ""
        assert act == probe["depth1" + ck] + 2 * probe["per_block" + ck]
    # checkpointing keeps only each block's input (B, T, C) fp32: far less than the whole block
    assert probe["per_block_ckpt"] == 2 * 11 * 32 * 4 < probe["per_block"]


def test_memory_plan_counts_every_8b_parameter():
    # the plan's weight bytes come from a closed-form parameter count: it must cover LLaDA-8B exactly
    from lab.memplan import memory_plan
    cfg = LLaDAConfig()
    with torch.device("meta"):
        n_params = LLaDA(cfg).num_params()
    C, F, V, n = cfg.d_model, cfg.hidden_size, cfg.padded_vocab, cfg.n_layers
    assert n * (4 * C * C + 3 * C * F) + 2 * V * C + (2 * n + 1) * C == n_params
    probe = {"per_block": 2**30, "depth1": 2**30, "per_block_ckpt": 2**20, "depth1_ckpt": 2**29}
    off, on = (memory_plan(cfg, 6, 256, probe, 128, True, ck) for ck in (False, True))
    assert 4.0 < off["NF4 blocks + bf16 embedding/head"] < 6.5  # ~7B weights at ~4.1 bits + 2 GB
    assert abs(off["LoRA adapters (fp32)"] - n * 128 * (7 * C + F) * 4 / 2**30) < 1e-9
    assert on["total"] < off["total"] and abs(off["total"] - sum(v for k, v in off.items() if k != "total")) < 1e-9
    # full fine-tuning: 16 bytes per parameter (fp32 weight, grad, 2 AdamW moments) split over 8 GPUs
    fsdp = memory_plan(cfg, 6, 256, probe, 0, False, True, world_size=8)
    assert abs(fsdp["fp32 weights + grads + AdamW, sharded /8"] - 16 * n_params / 8 / 2**30) < 1e-9


def test_cli_samplers_and_memory_plan_modes(capsys, tmp_path):
    small = ["--preset", "tiny", "--device", "cpu", "--prompt-len", "4", "--gen-length", "8",
             "--block-length", "4", "--diffusion-steps", "4", "--num-generations", "2"]
    run_cli(*small, "--samplers", "--repeats", "1")
    out = capsys.readouterr().out
    exact = next(line for line in out.splitlines() if line.startswith("exact "))
    assert "1.00x" in exact and "100.0%" in exact and "dual cache" in out
    from lab import rollouts
    rollouts.main(["--device", "cpu", "--gen-length", "8", "--block-length", "4", "--diffusion-steps", "4",
                   "--num-generations", "2", "--repeats", "1"])
    out = capsys.readouterr().out
    assert "round per rollout mode" in out
    assert sum(line.startswith(tuple(SAMPLERS)) for line in out.splitlines()) == len(SAMPLERS)  # a row per mode
    run_cli(*small, "--memory-plan", "--lora-r", "4", "--json", str(tmp_path / "m.json"))
    out = capsys.readouterr().out
    assert out.count("peak memory per GPU, LoRA r 4") == 2  # checkpointing off and on
    import json
    res = json.loads((tmp_path / "m.json").read_text())
    assert res["plan_checkpointing_True"]["total"] < res["plan_checkpointing_False"]["total"]


# -----------------------------------------------------------------------------
# python -m lab.preflight: one round of the configuration the trainer's own flags describe, and the projection


def test_project_hours_against_a_round_by_round_schedule():
    # independent: walk the run round by round, handing each micro-batch to the least-loaded GPU
    def schedule(round_s, steps, mu, prompts, groups, gpus):
        done, hours = 0, 0.0
        while done < steps:  # a round = μ optimizer steps, its rollout and updates for every micro-batch
            load = [0] * gpus
            for _ in range(-(-prompts // groups)):
                load[load.index(min(load))] += 1
            hours += max(load) * round_s / 3600
            done += mu
        return hours
    from lab.preflight import D1_STEPS, project_hours
    for steps, mu, prompts, groups, gpus in [(D1_STEPS["gsm8k"], 12, 16, 1, 8), (D1_STEPS["sudoku"], 8, 16, 2, 1),
                                             (100, 12, 16, 1, 3), (7, 2, 5, 2, 2)]:
        want = schedule(27.8, steps, mu, prompts, groups, gpus)
        assert abs(project_hours(27.8, steps, mu, prompts, groups, gpus) - want) < 1e-9
    # the README's example: 642 rounds x 2 micro-batches per GPU x 27.8 s on 8 GPUs
    assert abs(project_hours(27.8, 7700, 12, 16, 1, 8) - 642 * 2 * 27.8 / 3600) < 1e-9


def test_grpo_parse_args_preset_defaults_and_overrides():
    import grpo
    a = grpo.parse_args(["--preset", "8b"])
    assert (a.num_iterations, a.num_generations, a.max_prompt_length, a.lora_r, a.load_in_4bit) == \
        (12, 6, 200, 128, True)
    b = grpo.parse_args(["--preset", "8b", "--task", "gsm8k", "--num-iterations", "8", "--no-load-in-4bit"])
    assert (b.num_iterations, b.load_in_4bit, b.gen_length) == (8, False, 256)
    # the measured round: d1's GSM8K under a GPU preset with no --task (the toy's canvas is 16 tokens)
    assert grpo.parse_args(round_flags(["--preset", "8b"])).gen_length == 256
    assert grpo.parse_args(round_flags(["--preset", "8b", "--task", "toy"])).gen_length == 16
    assert grpo.parse_args(round_flags([])).task == "toy"


def test_preflight_measures_the_run_its_flags_describe(tmp_path):
    from modelio.checkpoint import make_tiny
    from lab.preflight import format_preflight, preflight, project_hours
    make_tiny(str(tmp_path / "m"))
    flags = ["--model-dir", str(tmp_path / "m"), "--device", "cpu", "--num-generations", "3",
             "--groups-per-micro", "2", "--prompts-per-step", "4", "--max-prompt-length", "6", "--gen-length", "4",
             "--block-length", "2", "--diffusion-steps", "2", "--num-iterations", "3", "--beta", "0.04",
             "--rounds", "5", "--task", "sudoku", "--preset", "tiny"]  # a real task: its default preset is 8b
    res = preflight(methods.grpo.parse_args(flags))
    assert res["model"] == str(tmp_path / "m")
    # the batch is groups_per_micro x G; the prompt is the longest the left cut lets through
    assert (res["batch_size"], res["prompt_len"], res["gen_length"]) == (6, 6, 4)
    assert res["passes"] == analytic_passes(methods.grpo.parse_args(flags))
    round_s = sum(res["seconds"].values())
    hours = res["projection_hours"]
    assert abs(hours["this run (15 steps), 1 CPU process"] - project_hours(round_s, 15, 3, 4, 2, 1)) < 1e-12
    assert "d1's sudoku (3800 steps), 1 CPU process" in hours
    report = format_preflight(res)
    assert "projected wall-clock, d1's sudoku" in report and "WARNING" not in report
    # every trainer flag (python -m methods.grpo's) reaches the measured round: a new objective is measured,
    # not silently the old loss
    wd1 = preflight(methods.grpo.parse_args(flags + ["--objective", "wd1"]))
    assert wd1["config"]["objective"] == "wd1"
    assert wd1["passes"] == passes(*flags, "--objective", "wd1") != res["passes"]
    # and the rollout mode too: a dual cache forwards the block alone at a block's later steps
    dual = preflight(methods.grpo.parse_args(flags + ["--rollout-cache", "dual", "--diffusion-steps", "4"]))
    assert dual["config"]["rollout_cache"] == "dual" and dual["rollout_columns"] == 2 * (10 + 2)  # (P + N) + block
    # the memory warning: above 90 % of the device's memory, and only then
    for share, warned in [(0.95, True), (0.85, False)]:
        fake = {**res, "memory_share": share}
        assert ("WARNING" in format_preflight(fake)) == warned


def test_preflight_cli_refuses_the_8b_shape_on_cpu(capsys):
    from lab.preflight import main as preflight_main
    assert preflight_main(["--preset", "8b", "--model-dir", "none", "--device", "cpu"]) == 1
    assert "needs a GPU" in capsys.readouterr().out


# -----------------------------------------------------------------------------
# --shape dream-7b: Dream-7B's shape in the memory plan, a tiny Dream's round, gpu_check's Dream round

# Dream-7B's numbers (Dream-org/Dream-v0-Instruct-7B's config.json), written out here, not read from modelio.families
DREAM_7B = dict(C=3584, n=28, heads=28, kv_heads=4, head_dim=128, F=18944, V=152064)


def fake_probe(*args, **kwargs):
    """Stands in for the activation probe (a forward at 7B widths takes minutes on 2 cores)."""
    return {"per_block": 2**30, "depth1": 2**30, "per_block_ckpt": 2**20, "depth1_ckpt": 2**29}


def test_memory_plan_counts_every_dream_7b_parameter(monkeypatch, tmp_path, capsys):
    C, n, kv, F, V = (DREAM_7B[k] for k in ("C", "n", "kv_heads", "F", "V"))
    kvw = kv * DREAM_7B["head_dim"]  # 512: grouped-query k and v are 4 heads of 128 wide, q is 28 of them (= C)
    linears = C * C + 2 * C * kvw + C * C + 3 * C * F  # q, k, v, o; gate, up, down
    rest = (C + 2 * kvw) + 2 * C                       # q/k/v biases; two RMSNorms
    total = n * (linears + rest) + 2 * V * C + C       # untied embedding and LM head, final norm
    assert total == 7_615_616_512
    from lab import memplan
    from lab.bench import preset_config
    with torch.device("meta"):
        assert LLaDA(preset_config("8b", "dream-7b")).num_params() == total
    monkeypatch.setattr(memplan, "probe_activations", fake_probe)
    plan_of = lambda path: json.loads(path.read_text())
    # full fine-tuning: 16 bytes per parameter over 8 GPUs
    run_cli("--preset", "8b", "--shape", "dream-7b", "--memory-plan", "--device", "cpu", "--lora-r", "0",
            "--no-load-in-4bit", "--json", str(tmp_path / "ft.json"))
    res = plan_of(tmp_path / "ft.json")
    assert (res["shape"], res["params"]) == ("dream-7b", total)
    assert "7,615,616,512 parameters" in capsys.readouterr().out
    ft = res["plan_checkpointing_False"]["fp32 weights + grads + AdamW, sharded /8"]
    assert abs(ft - 16 * total / 8 / 2**30) < 1e-9
    # QLoRA (the 8b preset): NF4 block linears, everything else bf16; fp32 LoRA on q, k, v (k and v 512 wide) and up
    run_cli("--preset", "8b", "--shape", "dream-7b", "--memory-plan", "--device", "cpu", "--json",
            str(tmp_path / "q.json"))
    plan = plan_of(tmp_path / "q.json")["plan_checkpointing_False"]
    nf4 = 0.5 + 1 / 64 + 4 / (64 * 256)
    weights = n * linears * nf4 + 2 * (total - n * linears)
    assert abs(plan["NF4 blocks + bf16 embedding/head"] - weights / 2**30) < 1e-9
    lora = n * 128 * ((C + C) + 2 * (C + kvw) + (C + F)) * 4
    assert abs(plan["LoRA adapters (fp32)"] - lora / 2**30) < 1e-9
    assert abs(plan["LoRA grads + AdamW states (fp32)"] - 3 * lora / 2**30) < 1e-9
    # no --shape: LLaDA-8B's, as before
    run_cli("--preset", "8b", "--memory-plan", "--device", "cpu", "--json", str(tmp_path / "l.json"))
    assert plan_of(tmp_path / "l.json")["params"] == 8_015_581_184


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    """A tiny LLaDA and a tiny Dream (GQA, q/k/v biases, shifted logits) in their official layouts."""
    from modelio.checkpoint import make_tiny
    root = tmp_path_factory.mktemp("tiny")
    return {family: str(make_tiny(root / family, family=family)) for family in ("llada", "dream")}


@pytest.mark.parametrize("objective,beta,lora_r", [("diffu_grpo", 0.04, 4), ("diffu_grpo", 0.04, 0), ("wd1", 0.04, 0),
                                                   ("justgrpo", 0.0, 0), ("spg", 0.0, 4), ("espo", 0.04, 0),
                                                   ("trajectory", 0.04, 4), ("gdsd", 0.04, 0)])
def test_a_tiny_dream_round_counts_the_calls_a_llada_round_does(tiny_dirs, tmp_path, objective, beta, lora_r):
    sampler = ["--block-length", "1", "--diffusion-steps", "4", "--ar-chunk", "3"] if objective == "justgrpo" else \
        ["--block-length", "2", "--diffusion-steps", "2", "--trajectory-segments", "2"]
    counted = {}
    for family, model_dir in tiny_dirs.items():
        run_cli("--model-dir", model_dir, "--device", "cpu", "--prompt-len", "4", "--num-generations", "2",
                "--gen-length", "4", *sampler, "--num-iterations", "2", "--beta", str(beta), "--lora-r", str(lora_r),
                "--objective", objective, "--json", str(tmp_path / f"{family}.json"))
        res = json.loads((tmp_path / f"{family}.json").read_text())
        counted[family] = res["passes"]
        assert res["passes"] == res["analytic"]
    assert counted["dream"] == counted["llada"]


def test_a_model_dir_brings_its_own_shape_over_the_shape_flag(tiny_dirs):
    from lab.bench import preset_model
    model, source = preset_model(grpo.parse_args(["--preset", "8b"]), "cpu", torch.float32, tiny_dirs["dream"],
                                 shape="llada-8b")
    assert source == tiny_dirs["dream"] and model.config.logit_shift and model.config.kv_heads == 1


@pytest.mark.parametrize("module", ["lab.bench", "lab.preflight"])
def test_shape_flag_in_help_with_its_default(module, capsys):
    import importlib
    with pytest.raises(SystemExit) as e:
        importlib.import_module(module).main(["--help"])
    assert e.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps to the terminal's width
    assert "--shape {llada-8b,dream-7b}" in out and "(default: llada-8b)" in out


def test_gpu_check_dream_round_runs_at_a_tiny_stand_in(tiny_dirs, tmp_path):
    # gpu_check has no CPU mode: its arguments, and its Dream-7B round's own command run on CPU against a tiny
    # Dream (--model-dir's config wins over --shape): NF4 blocks as on the GPU, LoRA r 4, a few tokens (later flags win)
    from lab import gpu_check
    from lab.preflight import main as preflight_main
    args = gpu_check.parse_args(["--skip", "tests,scripts", "--out-dir", str(tmp_path)])
    assert args.skip == {"tests", "scripts"} and args.peak_tflops == 989.0
    with pytest.raises(SystemExit):
        gpu_check.parse_args(["--skip", "8B"])  # a typo would run the part it meant to skip
    checks = {name: (cmd, summarize) for name, cmd, summarize in
              gpu_check.eightb_checks("python3", lambda *p: str(tmp_path.joinpath(*p)), 989.0)}
    cmd, summarize = checks["8b dream-7b qlora round"]
    argv = cmd[cmd.index("lab.preflight") + 1:]
    assert [argv[argv.index(f) + 1] for f in ("--preset", "--shape", "--rollout-cache")] == ["8b", "dream-7b", "none"]
    small = ["--model-dir", tiny_dirs["dream"], "--device", "cpu", "--lora-r", "4",
             "--num-generations", "2", "--max-prompt-length", "4", "--gen-length", "4", "--block-length", "2",
             "--diffusion-steps", "2", "--num-iterations", "1"]
    assert preflight_main(argv + small) == 0
    res = json.loads((tmp_path / "8b_dream7b.json").read_text())
    assert res["config"]["shape"] == "dream-7b" and res["model"] == tiny_dirs["dream"]
    assert res["config"]["rollout_cache"] == "none" and res["load_in_4bit"] and res["passes"] == res["analytic"]
    line = summarize()  # the line gpu_check prints for it: seconds per phase and peak memory
    assert line.startswith("rollout ") and "old/ref" in line and "update" in line and "GiB alloc" in line


def test_gpu_check_budget_knows_every_8b_check():
    # --budget-s skips a check by its usual seconds: a check added without an estimate would stop a GPU session
    # with a KeyError; the budget and --only parse; the projection's rounds run with --gpus 8
    from lab import gpu_check
    checks = gpu_check.eightb_checks("python3", lambda *p: "/x/" + "/".join(p), 989.0)
    names = [name for name, _, _ in checks]
    assert len(set(names)) == len(names) and set(names) == set(gpu_check.EST_SECONDS)
    # d1's QLoRA round in each rollout mode comes first: what a budget must not cut
    assert names[:3] == ["8b qlora round", "8b qlora round, dual", "8b qlora round, dual+0.9"]
    args = gpu_check.parse_args(["--budget-s", "540", "--only", "dream,justgrpo"])
    assert args.budget_s == 540 and args.only == "dream,justgrpo"
    jg = dict((n, c) for n, c, _ in checks)["8b justgrpo round"]
    assert jg[jg.index("--ar-chunk") + 1] == "2" and jg[jg.index("--gpus") + 1] == "8"
