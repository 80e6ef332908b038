"""
Tests for lab/compare.py without any training: the paired t-interval against hand computations, the
cache keys, `--rounds 0` as SFT alone, the commands of --dry-run in order, bad input (exit 2), the
cached step runner on tiny python -c commands, and the whole report from a hand-made cached run tree.

Run:  .venv/bin/python -m pytest tests/test_compare.py -q
"""
import json
import math
import shlex
import subprocess
import sys

import pytest

from lab import compare
from lab.compare import paired_summary, seed_plan, sft_alone, summary_line

REPO = compare.os.path.dirname(compare.os.path.dirname(compare.os.path.abspath(compare.__file__)))
# Student t 97.5 % quantiles from a printed table: 2 and 4 degrees of freedom
T2, T4 = 4.303, 2.776


def default_flags(**over):
    flags = {**compare.RECIPES["testbed"], **over}
    return {k: shlex.split(v) for k, v in flags.items()}


def test_paired_summary_n3_by_hand():
    s = paired_summary([10, 20, 30], [12, 23, 34])  # diffs 2, 3, 4: mean 3, sd 1
    assert s["n"] == 3 and s["diffs"] == [2, 3, 4] and s["mean"] == 3 and abs(s["sd"] - 1) < 1e-12
    half = T2 * 1 / math.sqrt(3)  # 2.484
    assert abs(s["ci"][0] - (3 - half)) < 1e-9 and abs(s["ci"][1] - (3 + half)) < 1e-9
    assert s["mean_a"] == 20 and s["mean_b"] == 23
    assert summary_line(s) == "B - A = +3.0 points, 95% CI [+0.5, +5.5] (t, n = 3 seeds); A 20.0 %, B 23.0 %"


def test_paired_summary_n5_by_hand():
    s = paired_summary([0, 0, 0, 0, 0], [1, 2, 3, 4, 5])  # mean 3, sd sqrt(2.5)
    half = T4 * math.sqrt(2.5) / math.sqrt(5)  # 1.963
    assert abs(s["ci"][0] - (3 - half)) < 1e-9 and abs(s["ci"][1] - (3 + half)) < 1e-9
    assert summary_line(s).startswith("B - A = +3.0 points, 95% CI [+1.0, +5.0] (t, n = 5 seeds)")


def test_interval_includes_zero_when_seeds_disagree():
    s = paired_summary([50, 50, 50], [49, 50, 52])  # diffs -1, 0, 2: mean 1/3, sd sqrt(7/3)
    half = T2 * math.sqrt(7 / 3) / math.sqrt(3)  # 3.795
    assert abs(s["mean"] - 1 / 3) < 1e-12 and abs(s["ci"][1] - s["mean"] - half) < 1e-9
    assert s["ci"][0] < 0 < s["ci"][1]


def test_one_seed_has_no_interval():
    s = paired_summary([10.0], [12.5])
    assert s["mean"] == 2.5 and s["ci"] is None
    assert summary_line(s) == "B - A = +2.5 points, 95% CI n/a (t, n = 1 seed); A 10.0 %, B 12.5 %"


def test_sft_alone():
    assert sft_alone(["--rounds", "0"]) and sft_alone(["--rounds=0"])
    assert sft_alone(["--task", "x", "--rounds", "5", "--rounds", "0"])  # the last --rounds wins, as in argparse
    assert not sft_alone(["--rounds", "0", "--rounds", "5"]) and not sft_alone([]) and not sft_alone(["--rounds", "x"])
    assert not sft_alone(["--num-iterations", "0"])


def test_cache_keys(tmp_path):
    root, v = str(tmp_path), (["--rounds", "0"], ["--beta", "0"])
    steps, evals = seed_plan(0, root, default_flags(), v)
    dirs = {label: d for label, d, _, _ in steps}
    # SFT alone: no grpo.py for A, whose eval reads the SFT model itself
    assert list(dirs) == ["init", "sft", "eval A", "grpo B", "eval B"]
    assert evals == [dirs["eval A"], dirs["eval B"]] and dirs["eval A"].startswith(dirs["sft"] + "_eval-")
    assert dirs["eval B"].startswith(dirs["grpo B"] + "_eval-")
    # the same flags (spaced differently) -> the same dirs; only the seed dir changes with the seed
    assert seed_plan(0, root, default_flags(grpo=" " + compare.RECIPES["testbed"]["grpo"] + "  "), v) == (steps, evals)
    assert seed_plan(1, root, default_flags(), v)[1][0] == evals[0].replace("seed0", "seed1")
    # a different grpo recipe: the same SFT, another RL dir; different SFT flags: everything moves
    other = {label: d for label, d, _, _ in seed_plan(0, root, default_flags(grpo="--task countdown_toy"), v)[0]}
    assert other["sft"] == dirs["sft"] and other["grpo B"] != dirs["grpo B"] and other["eval A"] == dirs["eval A"]
    other = {label: d for label, d, _, _ in seed_plan(0, root, default_flags(sft="--max-steps 10"), v)[0]}
    assert all(other[k] != dirs[k] for k in dirs)
    other = {label: d for label, d, _, _ in seed_plan(0, root, default_flags(eval="--toy-items 50"), v)[0]}
    assert other["sft"] == dirs["sft"] and other["eval A"] != dirs["eval A"] and other["eval B"] != dirs["eval B"]
    # both SFT alone: the shared eval is run once
    steps2, evals2 = seed_plan(0, root, default_flags(), (["--rounds", "0"], ["--rounds=0"]))
    assert [label for label, *_ in steps2] == ["init", "sft", "eval A"] and evals2[0] == evals2[1]


def test_dry_run_prints_the_commands_in_order(tmp_path, capsys):
    compare.main(["--dry-run", "--seeds", "3,1", "--out", str(tmp_path), "--a", "--rounds 0", "--b", "--beta=0"])
    lines = [shlex.split(l) for l in capsys.readouterr().out.splitlines()]
    assert len(lines) == 10 and all(l[0] == sys.executable for l in lines)
    scripts = [l[1:3] if l[1] == "-m" else l[1:2] for l in lines[:5]]
    assert scripts == [["-m", "modelio.checkpoint"], ["sft.py"], ["eval.py"], ["-m", "methods.grpo"], ["eval.py"]]
    out_dir = [l[l.index("--out-dir") + 1] for l in lines]
    sd = out_dir[0].removesuffix("/init")
    assert sd.startswith(str(tmp_path) + "/sft-") and sd.endswith("/seed3") and out_dir[5] == sd[:-1] + "1/init"
    assert lines[0][-3:] == ["--seed", "3", "--tags"]
    assert lines[1][2:10] == ["--model-dir", sd + "/init", "--out-dir", sd + "/sft", "--seed", "3", *compare.RESUME]
    assert lines[1][10:] == shlex.split(compare.RECIPES["testbed"]["sft"])
    # the variant's flags come last, after the shared grpo flags
    assert lines[3][3:5] == ["--model-dir", sd + "/sft"] and lines[3][-1] == "--beta=0"
    assert lines[3][7:11] == ["--seed", "3", *compare.RESUME] and compare.RESUME[0] not in lines[0] + lines[2]
    shared = shlex.split(compare.RECIPES["testbed"]["grpo"])
    assert lines[3][-1 - len(shared):-1] == shared
    assert lines[2][2:4] == ["--model-dir", sd + "/sft"]
    assert lines[2][-4:] == ["--task", "countdown_toy", "--toy-items", "500"]
    assert lines[4][3] == out_dir[3] and lines[4][lines[4].index("--json") + 1] == out_dir[4] + "/eval.json"


def test_toy_recipe_runs_what_make_run_runs(tmp_path, capsys):
    # lab/runs/toy.sh per seed: modelio.checkpoint, sft.py and grpo.py's round (python -m methods.grpo) at their
    # defaults, eval.py on the toy
    compare.main(["--dry-run", "--recipe", "toy", "--seeds", "2", "--out", str(tmp_path), "--a", "",
                  "--b", "--rollout-cache dual"])
    lines = [shlex.split(l) for l in capsys.readouterr().out.splitlines()]
    assert lines[0][-2:] == ["--seed", "2"] and lines[1][-4:] == ["--seed", "2", *compare.RESUME]  # no flags
    assert lines[2][1:3] == ["-m", "methods.grpo"] and lines[2][-4:] == ["--seed", "2", *compare.RESUME]  # A: defaults
    assert lines[4][-2:] == ["--rollout-cache", "dual"]
    assert [l[1] for l in lines[3::2]] == ["eval.py", "eval.py"]
    assert all(l[-2:] == ["--task", "toy"] for l in lines[3::2])


def test_cli_dry_run_and_flag_overrides(tmp_path):
    res = subprocess.run([sys.executable, "-m", "lab.compare", "--dry-run", "--seeds", "0", "--out", str(tmp_path),
                          "--a", "--objective diffu_grpo", "--b", "--objective wd1", "--grpo-flags", "--rounds=2",
                          "--eval-flags", "--toy-items 7", "--init-flags", "", "--sft-flags", "--max-steps 3"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = [shlex.split(l) for l in res.stdout.splitlines()]
    assert [l[2] if l[1] == "-m" else l[1] for l in lines] == ["modelio.checkpoint", "sft.py", "methods.grpo", "eval.py",
                                                               "methods.grpo", "eval.py"]
    assert lines[0][-1] == "0" and lines[1][-2:] == ["--max-steps", "3"]
    assert lines[2][-3:] == ["--rounds=2", "--objective", "diffu_grpo"] and lines[4][-2:] == ["--objective", "wd1"]
    assert lines[3][-2:] == ["--toy-items", "7"]


@pytest.mark.parametrize("argv", [["--seeds", ""], ["--seeds", ","], ["--seeds", "0,x"], ["--seeds", "1.5"],
                                  ["--seeds", "0,0"], ["--a", "--beta 0", "--b", " --beta  0"], ["--b", "'"],
                                  ["--jobs", "0"]])
def test_bad_input_exits_2(argv, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        compare.main(["--dry-run", "--out", str(tmp_path), *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("lab.compare: error:") and "\n" not in err


def test_run_step_caches_and_reports_failures(tmp_path):
    out, counter = str(tmp_path / "seed0" / "step"), tmp_path / "runs.txt"
    write = (f"import os; os.makedirs({out!r}, exist_ok=True); open({out!r} + '/config.json', 'w').close(); "
             f"open({str(counter)!r}, 'a').write('x')")
    cmd = [sys.executable, "-c", write]
    assert compare.run_step(cmd, out, "config.json") is False and compare.run_step(cmd, out, "config.json") is True
    assert counter.read_text() == "x"  # the second call ran nothing
    # a dir without the marker (a killed run) is deleted and run again
    compare.os.remove(out + "/" + compare.DONE)
    open(out + "/stale", "w").close()
    assert compare.run_step(cmd, out, "config.json") is False and counter.read_text() == "xx"
    assert not compare.os.path.exists(out + "/stale")
    # a failure names the command and shows the log's tail; no marker is written
    bad = [sys.executable, "-c", "print('boom'); raise SystemExit(3)"]
    with pytest.raises(RuntimeError, match=r"(?s)exit 3.*raise SystemExit.*boom"):
        compare.run_step(bad, str(tmp_path / "bad"), "config.json")
    assert not compare.os.path.exists(str(tmp_path / "bad" / compare.DONE))
    # exit 0 without the product is a failure too
    with pytest.raises(RuntimeError, match="exit 0"):
        compare.run_step([sys.executable, "-c", "pass"], str(tmp_path / "empty"), "config.json")


def test_an_unfinished_trainer_step_is_continued_not_deleted(tmp_path):
    # a trainer's command carries --resume auto: what its killed run left (saves, log) stays for it to continue
    out = str(tmp_path / "seed0" / "sft")
    compare.os.makedirs(out + "/saves/step-000002")
    with open(out + ".log", "w") as f:
        f.write("first part\n")
    seen = tmp_path / "seen.txt"
    script = (f"import os, sys; open({str(seen)!r}, 'w').write(' '.join(sorted(os.listdir({out!r}))) + '|' + "
              f"' '.join(sys.argv[1:])); open({out!r} + '/config.json', 'w').close(); print('second part')")
    assert compare.run_step([sys.executable, "-c", script, *compare.RESUME], out, "config.json") is False
    assert seen.read_text() == "saves|" + " ".join(compare.RESUME)
    assert open(out + ".log").read() == "first part\nsecond part\n"
    assert compare.is_done(out, "config.json")


def fake_eval(ev, n_correct, n_items=10, ids=None):
    """A finished eval.py --out-dir: gsm8k-style records re-scored by ops/results.py on read."""
    ids = ids or list(range(n_items))
    res = compare.os.path.join(ev, "gsm8k_128")
    compare.os.makedirs(res)
    man = {"task": "gsm8k", "gen_length": 128, "item_ids": ids, "world_size": 1, "complete": True}
    with open(res + "/manifest.json", "w") as f:
        json.dump(man, f)
    with open(res + "/generations.rank0.jsonl", "w") as f:
        for k, i in enumerate(ids):
            f.write(json.dumps({"id": i, "generation": f"\\boxed{{{5 if k < n_correct else 4}}}",
                                "example": {"answer": "5"}}) + "\n")
    for name in ("eval.json", compare.DONE):
        open(compare.os.path.join(ev, name), "w").close()


def cached_tree(root, correct_a, correct_b, b_ids=None):
    """Every step of seeds 0.. already done, with A / B getting correct_a[s] / correct_b[s] of 10 right."""
    for s, (ca, cb) in enumerate(zip(correct_a, correct_b)):
        steps, (ev_a, ev_b) = seed_plan(s, root, default_flags(), (["--rounds", "0"], []))
        for label, d, _, _ in steps:
            if not label.startswith("eval"):
                compare.os.makedirs(d)
                for name in ("config.json", compare.DONE):
                    open(compare.os.path.join(d, name), "w").close()
        fake_eval(ev_a, ca)
        fake_eval(ev_b, cb, ids=b_ids)


def test_report_from_a_cached_tree(tmp_path, capsys):
    root = str(tmp_path)
    cached_tree(root, [2, 4, 6], [3, 6, 7])  # A 20, 40, 60 %; B 30, 60, 70 %: diffs 10, 20, 10
    compare.main(["--seeds", "0,1,2", "--out", root, "--jobs", "2", "--json", root + "/s.json"])
    out = capsys.readouterr().out.strip().splitlines()
    assert sum(" cached -> " in l for l in out) == 3 * 5  # nothing ran
    half = T2 * math.sqrt(100 / 3) / math.sqrt(3)  # sd of (10, 20, 10) = 5.774 -> 14.34
    assert f"[{40 / 3 - half:+.1f}, {40 / 3 + half:+.1f}]" == "[-1.0, +27.7]"
    assert out[-1] == "B - A = +13.3 points, 95% CI [-1.0, +27.7] (t, n = 3 seeds); A 40.0 %, B 53.3 %"
    se = sum(100 * math.sqrt(p * (1 - p) / 10) for p in (0.2, 0.4, 0.6, 0.3, 0.6, 0.7)) / 6
    assert out[-2].startswith(f"sampling SE of one eval (binomial, 10 items): {se:.1f} points")
    assert "     1    40.0    60.0   +20.0" in out
    summary = json.load(open(root + "/s.json"))
    assert summary["acc_a"] == [20, 40, 60] and summary["acc_b"] == [30, 60, 70] and summary["n"] == 3
    assert abs(summary["ci"][1] - (40 / 3 + half)) < 1e-9 and summary["seeds"] == [0, 1, 2]


def test_report_refuses_different_items(tmp_path, capsys):
    cached_tree(str(tmp_path), [2], [3], b_ids=list(range(1, 11)))
    with pytest.raises(SystemExit) as e:
        compare.main(["--seeds", "0", "--out", str(tmp_path)])
    assert e.value.code == 2 and "different items" in capsys.readouterr().err


def test_testbed_breakdown_counts_by_problem_size(tmp_path, capsys):
    # a countdown_toy eval of 3 items, re-scored on read by d1's Countdown reward: 2 numbers right,
    # 3 numbers one right and one wrong (uses 9, which it was not given)
    from lab import testbed_breakdown
    ev = tmp_path / "sft-x" / "seed0" / "sft_eval-y"
    res = ev / "countdown_toy_48"
    res.mkdir(parents=True)
    items = [([3, 4], 7, "3+4"), ([2, 5, 6], 16, "2*5+6"), ([2, 5, 6], 16, "9+5+2")]
    json.dump({"task": "countdown_toy", "gen_length": 48, "item_ids": [0, 1, 2], "world_size": 1, "complete": True},
              open(res / "manifest.json", "w"))
    with open(res / "generations.rank0.jsonl", "w") as f:
        for i, (nums, target, expr) in enumerate(items):
            f.write(json.dumps({"id": i, "generation": f"<reasoning>\n</reasoning>\n<answer>\n{expr}\n</answer>",
                                "example": {"nums": nums, "target": target, "answer": str(target)}}) + "\n")
    recs = compare.read_eval_records(str(ev))
    with pytest.raises(SystemExit):  # not marked done by lab.compare: not a result yet, so nothing to show
        testbed_breakdown.main(["--root", str(tmp_path)])
    (ev / compare.DONE).touch()
    assert testbed_breakdown.accuracy_by_count(recs) == {2: (100.0, 1), 3: (50.0, 2)}
    testbed_breakdown.main(["--root", str(tmp_path)])
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["sft-x/seed0", "sft", "100.0", "50.0"] and out[-1] == "items per count: 2: 1, 3: 2"
    with pytest.raises(SystemExit):
        testbed_breakdown.main(["--root", str(tmp_path), "--models", "rl-none"])


def test_update_stats_from_metrics_by_hand(tmp_path):
    # three rounds of one run, one of them exploding, and a curve row without update fields (skipped)
    rl = tmp_path / "seed0" / "rl-abc"
    rl.mkdir(parents=True)
    rows = [{"step": 0, "heldout_acc": 5.0}] + [
        {"step": i + 1, "ratio_dev": d, "ratio_mean": m, "clip_frac": c, "grad_norm": g, "zero_std_groups": z,
         "reward_std": 0.25 * i, "distinct": 1.0 - 0.25 * i, "completion_len": 10.0 + i, "rollout_calls": 8.0 - i,
         "s_rollout": 2.0 + i, "elapsed_s": 10.0 * (i + 1)}
        for i, (d, m, c, g, z) in enumerate([(0.02, 1.0, 0.0, 0.4, 0.5), (40.0, 41.0, 0.01, 2000.0, 0.75),
                                             (0.05, 1.01, 0.002, 0.6, 1.0)])]
    (rl / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    st = compare.update_stats([str(rl) + "_eval-xyz", str(tmp_path / "seed0" / "sft") + "_eval-xyz"])
    assert st == pytest.approx({"rounds": 3, "ratio_dev_median": 0.05, "ratio_dev_max": 40.0, "grad_norm_median": 0.6,
                                "grad_norm_max": 2000.0, "clip_frac_median": 0.002, "clip_frac_max": 0.01,
                                "ratio_mean_max": 41.0, "zero_std_groups": 0.75, "reward_std": 0.25, "distinct": 0.75,
                                "completion_len": 11.0, "rollout_calls": 7.0, "s_rollout": 3.0,
                                "train_s": 30.0})
    assert compare.update_stats([str(tmp_path / "seed0" / "sft") + "_eval-xyz"]) is None  # SFT alone: no run
    # a ratio-free objective (wd1, SPG) logs no ratio or clip: its rounds still count, those figures are NaN
    wd1 = tmp_path / "seed0" / "rl-wd1"
    wd1.mkdir()
    (wd1 / "metrics.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k not in (
        "ratio_dev", "ratio_mean", "clip_frac")}) + "\n" for r in rows))
    free = compare.update_stats([str(wd1) + "_eval-xyz"])
    assert free["rounds"] == 3 and free["train_s"] == 30.0 and free["grad_norm_median"] == 0.6
    assert math.isnan(free["ratio_dev_median"]) and math.isnan(free["ratio_mean_max"])
    line = compare.stats_line("B", st)
    assert "|ratio - 1| 0.050 / 40.000" in line and "distinct 75 %, length 11.0, model calls 7.0" in line
    assert "model calls 7.0; 3.00 s a rollout, 30 s a run" in line
