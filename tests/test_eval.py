"""
Tests for eval.py: a generation run on the tiny model writes the JSONL + manifest, multi-seed and
`lab.evals compare` work on it (and methods.eval's cached sampler beside the exact one), --rescore reads
ours and d1's files, and the statistics against hand cases.
(The reproduction of d1's LLaDA row from its released generations is in tests/test_parsers.py.)

Run: python -m pytest tests/test_eval.py -q
"""
import json
import math
import subprocess
import sys

import pytest

from conftest import REPO, SHARED_DATA, run, torchrun
from lab.evals import paired_bootstrap, summarize
from modelio.provenance import same_weights
from modelio.checkpoint import make_tiny
from ops.stats import mean_and_spread
from ops.results import D1_FILE, rescore
from tasks import TASKS


def test_paired_bootstrap_and_mean_ci():
    a = [0, 1, 0, 1, 1, 0, 1, 0] * 10
    diff, lo, hi = paired_bootstrap(a, a)
    assert diff == lo == hi == 0  # identical runs: no difference, no spread
    b = [1] * 80
    diff, lo, hi = paired_bootstrap(a, b)
    assert diff == 0.5 and lo < 0.5 < hi and hi - lo < 0.3
    m, sd, ci = mean_and_spread([10.0, 20.0, 30.0])
    assert m == 20 and sd == 10 and abs(ci - 4.303 * 10 / 3 ** 0.5) < 1e-9


def test_d1_file_names_parse():
    m = D1_FILE.search("math500_instruct_256_128_3_generations.json")
    assert (m["task"], m["gen"], m["steps"], m["rank"]) == ("math500", "256", "128", "3")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny(tmp_path_factory.mktemp("m") / "tiny", d_model=32, n_heads=4, n_kv_heads=4, n_layers=1,
                     mlp_hidden_size=64)


def test_generation_run_writes_jsonl_manifest_and_multi_seed_compare(tmp_path, tiny):
    ev = [sys.executable, str(REPO / "eval.py"), "--model-dir", str(tiny), "--task", "toy", "--toy-items", "12"]
    out = run(ev + ["--out-dir", str(tmp_path / "a"), "--json", str(tmp_path / "a.json")], REPO)
    d = tmp_path / "a" / "toy_16"
    man = json.loads((d / "manifest.json").read_text())
    for key in ("model_dir", "model_fingerprint", "task", "item_ids", "gen_length", "block_length", "steps",
                "temperature", "remasking", "seed", "dtype", "batch_size", "parser_version", "device"):
        assert key in man, key
    assert man["steps"] == 8 and man["gen_length"] == 16 and len(man["item_ids"]) == 12
    assert man["model_fingerprint"]["config.json"] is not None
    lines = [json.loads(x) for x in (d / "generations.rank0.jsonl").read_text().splitlines()]
    assert len(lines) == 12 and {"id", "prompt", "generation", "pred", "score", "correct"} <= set(lines[0])
    rows = json.loads((tmp_path / "a.json").read_text())
    assert rows[0]["task"] == "toy" and rows[0]["items"] == 12 and f"{rows[0]['accuracy']:.1f}%" in out
    # rescoring the saved run gives the same accuracy
    assert rescore([str(d)], TASKS)[0]["accuracy"] == rows[0]["accuracy"]
    # two sampling seeds at temperature 1: two result dirs and a mean with a CI
    out = run(ev + ["--out-dir", str(tmp_path / "s"), "--seeds", "2", "--temperature", "1.0"], REPO)
    assert (tmp_path / "s" / "toy_16_seed0" / "manifest.json").exists() and (tmp_path / "s" / "toy_16_seed1").exists()
    assert "95% CI over 2 seeds" in out
    # comparing two seeds of the same evaluation works; comparing with the greedy run is refused
    compare = [sys.executable, "-m", "lab.evals", "compare"]
    out = run(compare + [str(tmp_path / "s" / "toy_16_seed0"), str(tmp_path / "s" / "toy_16_seed1")], REPO)
    assert "95% paired-bootstrap CI" in out and "over 12 items" in out
    assert "note: A and B are the same weights (fingerprint " in out  # two seeds of one model, said so
    res = subprocess.run(compare + [str(d), str(tmp_path / "s" / "toy_16_seed0")], cwd=REPO, capture_output=True,
                         text=True)
    assert res.returncode != 0 and "temperature" in res.stderr + res.stdout
    # harder held-out toy puzzles: every item has 6-7 blanks, and the same item ids are a different
    # evaluation, so the comparison refuses the pair
    run(ev + ["--out-dir", str(tmp_path / "h"), "--toy-blanks", "6,7"], REPO)
    hard = [json.loads(x) for x in (tmp_path / "h" / "toy_16" / "generations.rank0.jsonl").read_text().splitlines()]
    assert all(rec["example"]["puzzle"].count("0") in (6, 7) for rec in hard)
    assert all(rec["example"]["puzzle"].count("0") <= 5 for rec in lines)
    assert json.loads((tmp_path / "h" / "toy_16" / "manifest.json").read_text())["toy_blanks"] == "6,7"
    res = subprocess.run(compare + [str(d), str(tmp_path / "h" / "toy_16")], cwd=REPO, capture_output=True, text=True)
    assert res.returncode != 0 and "toy_blanks" in res.stderr + res.stdout
    # the field's cached sampler (python -m methods.eval) on the same items: recorded in the manifest beside
    # remasking, and comparable with eval.py's exact run (that is how its accuracy cost is measured), the
    # difference printed as a note; eval.py's own manifest names no sampler option
    field = [sys.executable, "-m", "methods.eval", *ev[2:]]
    run(field + ["--out-dir", str(tmp_path / "c"), "--block-length", "8", "--cache", "dual", "--threshold", "0.9"],
        REPO)
    man_c = json.loads((tmp_path / "c" / "toy_16" / "manifest.json").read_text())
    assert (man_c["cache"], man_c["threshold"]) == ("dual", 0.9) and "cache" not in man and "threshold" not in man
    assert list(man_c)[list(man_c).index("remasking") + 1:][:2] == ["cache", "threshold"]
    run(ev + ["--out-dir", str(tmp_path / "e"), "--block-length", "8"], REPO)
    out = run(compare + [str(tmp_path / "e" / "toy_16"), str(tmp_path / "c" / "toy_16")], REPO)
    assert "differ in ['cache', 'threshold']" in out and "over 12 items" in out
    # with every option off, methods.eval is eval.py: the same records, the options recorded as None
    run(field + ["--out-dir", str(tmp_path / "x"), "--block-length", "8"], REPO)
    man_x = json.loads((tmp_path / "x" / "toy_16" / "manifest.json").read_text())
    assert (man_x["cache"], man_x["threshold"]) == (None, None)
    assert (tmp_path / "x" / "toy_16" / "generations.rank0.jsonl").read_bytes() == \
        (tmp_path / "e" / "toy_16" / "generations.rank0.jsonl").read_bytes()


@pytest.mark.skipif(not SHARED_DATA.exists(), reason="needs ../shared/data")
def test_real_task_smoke_run_uses_d1_subset_and_eval_prompt(tmp_path, tiny):
    data = SHARED_DATA / "d1_sudoku" / "4x4_test_sudoku.csv"
    run([sys.executable, str(REPO / "eval.py"), "--model-dir", str(tiny), "--task", "sudoku", "--data", str(data),
         "--gen-lengths", "32", "--limit", "3", "--out-dir", str(tmp_path)], REPO)
    man = json.loads((tmp_path / "sudoku_32" / "manifest.json").read_text())
    assert man["item_ids"] == [361, 73, 374] and man["steps"] == 16 and man["block_length"] == 32
    rec = json.loads((tmp_path / "sudoku_32" / "generations.rank0.jsonl").read_text().splitlines()[0])
    assert rec["example"]["puzzle"] and "cells_total" in rec


@pytest.mark.skipif(not SHARED_DATA.exists(), reason="needs ../shared/data")
def test_rescore_d1_files_json(tmp_path):
    files = sorted(str(p) for p in (SHARED_DATA / "d1_eval_baselines").glob("countdown_instruct_*_generations.json"))
    rows = rescore(files, TASKS, json_out=tmp_path / "r.json")
    assert [(r["task"], r["gen_length"], r["items"]) for r in rows] == [("countdown", g, 256) for g in (128, 256, 512)]
    assert [round(r["accuracy"], 1) for r in rows] == [20.7, 19.5, 16.0]
    assert json.loads((tmp_path / "r.json").read_text()) == rows


@pytest.mark.skipif(not SHARED_DATA.exists(), reason="needs ../shared/data")
def test_rescore_a_folder_of_d1_files_equals_the_files(tmp_path):
    # `--rescore d1_eval_baselines` stands for the *_generations.json files in it: d1's LLaDA row
    folder = SHARED_DATA / "d1_eval_baselines"
    rows = rescore([str(folder)], TASKS)
    assert rows == rescore(sorted(str(p) for p in folder.glob("*_generations.json")), TASKS)
    assert [round(r["accuracy"], 1) for r in rows if r["task"] == "gsm8k"] == [69.3, 76.4, 78.1]
    out = run([sys.executable, str(REPO / "eval.py"), "--rescore", str(folder)], REPO)
    assert "gsm8k  256:  1130 items, accuracy 76.4%" in out


def test_torchrun_sharding_gives_the_same_results(tmp_path, tiny):
    args = [str(REPO / "eval.py"), "--model-dir", str(tiny), "--toy-items", "10"]
    run([sys.executable, *args, "--out-dir", str(tmp_path / "one")], REPO)
    run(torchrun(2) + [*args, "--out-dir", str(tmp_path / "two")], REPO)
    one = rescore([str(tmp_path / "one" / "toy_16")], TASKS)
    two = rescore([str(tmp_path / "two" / "toy_16")], TASKS)
    assert one == two and one[0]["items"] == 10
    assert len((tmp_path / "two" / "toy_16" / "generations.rank1.jsonl").read_text().splitlines()) == 5
    # one process into the same folder: refused without --force; --force deletes the 2-rank run's files, so
    # its rank1 file cannot be counted again (15 items, 1/3 more, with no warning)
    res = subprocess.run([sys.executable, *args, "--out-dir", str(tmp_path / "two")], cwd=REPO, capture_output=True,
                         text=True)
    assert res.returncode == 2 and "--force starts over" in res.stderr
    run([sys.executable, *args, "--out-dir", str(tmp_path / "two"), "--force"], REPO)
    assert not (tmp_path / "two" / "toy_16" / "generations.rank1.jsonl").exists()
    assert rescore([str(tmp_path / "two" / "toy_16")], TASKS) == one


def test_summarize_prints_the_make_run_table(tmp_path, capsys):
    # the table lab/runs/toy.sh prints, from per-seed eval JSONs; checked against statistics + the t table
    import statistics
    sft, grpo = [0.5, 2.0, 0.5], [16.0, 28.0, 17.0]
    for i, (a, b) in enumerate(zip(sft, grpo)):
        d = tmp_path / f"seed{i}"
        d.mkdir()
        (d / "eval_sft.json").write_text(json.dumps([{"task": "toy", "accuracy": a}]))
        (d / "eval_grpo.json").write_text(json.dumps([{"task": "toy", "accuracy": b}]))
    stats = summarize(str(tmp_path))
    gains = [b - a for a, b in zip(sft, grpo)]
    T_975_DF2 = 4.302652729911275  # Student t, 97.5 % quantile, 2 degrees of freedom
    want = (statistics.mean(gains), statistics.stdev(gains), T_975_DF2 * statistics.stdev(gains) / math.sqrt(3))
    for got, w in zip(stats["gain"], want):
        assert abs(got - w) < 1e-4 * abs(w)  # the table's t has 3 decimals
    out = capsys.readouterr().out
    assert "   seed1     2.0      28.0   +26.0" in out and "    mean     1.0      20.3   +19.3" in out
    with pytest.raises(FileNotFoundError):
        summarize(str(tmp_path / "empty"))


def test_same_weights_only_when_both_recorded_and_equal():
    """compare's note: equal recorded weights only; other weights, or none recorded, say nothing."""
    def man(sha, config="c"):
        return {"model_fingerprint": {"config.json": config, "weights": {"weights_sha256": sha, "sampled": None}}}
    assert same_weights(man("a" * 64), man("a" * 64)) == "a" * 12
    assert same_weights(man("a" * 64), man("b" * 64)) is None
    assert same_weights(man("a" * 64), man("a" * 64, config="other")) is None
    assert same_weights(man(None), man(None)) is None
