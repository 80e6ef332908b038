"""
Tests for meeting users where they arrive: --model-dir as a hub id, a hub cache snapshot or a cache
folder (modelio/hub.py), never a silent toy model on a real task (ops/checks.check_model and the trainers'
presets), --help that shows every default, grpo.py's bar naming the phase of a round, and a README
recipe whose commands read what an earlier command wrote. No test touches the network: the hub is a
cache laid out by tests/conftest.write_hub_cache, and the online path is a stand-in snapshot_download.
(Data from the hub, parquet and dataset ids: tests/test_records.py; what a save carries for other
tools: tests/test_checkpoint.py; Ctrl-C under torchrun: tests/test_stop.py.)

Run: python -m pytest tests/test_hub.py -q
"""
import json
import os
import re
import shlex
import subprocess
import sys
from types import SimpleNamespace

import huggingface_hub
import pytest
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

import grpo
from conftest import REPO, write_hub_cache
from modelio.checkpoint import make_tiny
from modelio.hub import DOWNLOAD_PATTERNS, ModelSource, resolve_model

LLADA = "GSAI-ML/LLaDA-8B-Instruct"
COMMIT_A, COMMIT_B = "a" * 40, "b" * 40
SMALL = dict(d_model=32, n_heads=4, n_kv_heads=4, n_layers=1, mlp_hidden_size=64)
# a grpo.py round in a few seconds on the tiny model: 2 micro-batches of one group, μ 2
ROUND = ["--preset", "tiny", "--num-examples", "8", "--prompts-per-step", "2", "--groups-per-micro", "1",
         "--num-generations", "2", "--num-iterations", "2", "--gen-length", "16", "--block-length", "16",
         "--diffusion-steps", "2", "--rounds", "1", "--max-prompt-length", "32"]


def gsm8k_parquet(path):
    """Two GSM8K rows as the hub ships them (openai/gsm8k, config main): parquet, columns question, answer."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"question": ["What is 2 + 3?", "What is 4 + 4?"],
                             "answer": ["2 + 3 = 5\n#### 5", "4 + 4 = 8\n#### 8"]}), path)
    return path


@pytest.fixture()
def hub(tmp_path):
    """A hub cache holding LLaDA's id at commit A: the tiny model, its files linked into blobs/."""
    src = make_tiny(tmp_path / "src", **SMALL)
    write_hub_cache(tmp_path / "cache", LLADA, src, COMMIT_A)
    return tmp_path / "cache"


def offline_env(cache):
    return {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1"}


def script(cmd, env=None, cwd=REPO):
    return subprocess.run([sys.executable, *cmd], cwd=cwd, env=env or {**os.environ, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=600)


# -----------------------------------------------------------------------------
# resolving --model-dir


def test_every_form_of_a_cached_model_resolves_to_its_snapshot(hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = hub / f"models--{LLADA.replace('/', '--')}"
    snap = str(repo / "snapshots" / COMMIT_A)
    want = ModelSource(snap, LLADA, LLADA, COMMIT_A)
    assert resolve_model(LLADA, cache_dir=hub) == want
    assert resolve_model(f"{LLADA}@{COMMIT_A}", cache_dir=hub) == ModelSource(snap, f"{LLADA}@{COMMIT_A}", LLADA,
                                                                              COMMIT_A)
    assert resolve_model(str(repo)) == ModelSource(snap, str(repo), LLADA, COMMIT_A)  # the model's cache folder
    assert resolve_model(snap) == ModelSource(snap, snap, LLADA, COMMIT_A)  # a snapshot: its commit is its name
    assert os.path.islink(os.path.join(snap, "config.json"))  # as the hub leaves it: links into blobs/
    # the cache's root is not a model: one line that names what it holds and how to ask for it
    with pytest.raises(FileNotFoundError, match=f"hub cache holding {LLADA}: give the id"):
        resolve_model(str(hub))
    # offline and not cached: says why nothing was downloaded, and how to get it
    with pytest.raises(FileNotFoundError, match=r"HF_HUB_OFFLINE=1 forbids downloading.*hf download GSAI-ML/other"):
        resolve_model("GSAI-ML/other", cache_dir=hub)


def test_main_moved_on_resolves_to_the_new_commit_and_a_pinned_revision_to_the_old(hub, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    write_hub_cache(hub, LLADA, make_tiny(tmp_path / "src-b", seed=1, **SMALL), COMMIT_B)
    assert resolve_model(LLADA, cache_dir=hub).revision == COMMIT_B
    assert resolve_model(LLADA, cache_dir=hub, revision=COMMIT_A).revision == COMMIT_A  # what a resume passes
    assert resolve_model(f"{LLADA}@{COMMIT_B}", cache_dir=hub, revision=COMMIT_A).revision == COMMIT_B  # typed wins


def test_online_a_hub_id_is_downloaded_with_the_models_files_only(monkeypatch, tmp_path):
    calls = []

    def fake_download(repo, **kw):
        calls.append((repo, kw))
        path = tmp_path / "snapshots" / COMMIT_A
        path.mkdir(parents=True, exist_ok=True)
        return str(path)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    src = resolve_model(f"{LLADA}@v2")
    assert calls == [(LLADA, {"revision": "v2", "cache_dir": None, "local_files_only": False,
                              "allow_patterns": DOWNLOAD_PATTERNS})]
    assert (src.repo, src.revision) == (LLADA, COMMIT_A)
    # the hub's refusals, each one line that says what would work
    response = SimpleNamespace(headers={}, request=None)  # what the hub's errors read of an HTTP response
    for error, message in [(RepositoryNotFoundError("404", response=response), "the hub has no model"),
                           (GatedRepoError("403", response=response), "gated")]:
        monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo, **kw: (_ for _ in ()).throw(error))
        with pytest.raises((ValueError, FileNotFoundError), match=message):
            resolve_model(LLADA)


def test_local_paths_never_reach_the_hub(monkeypatch, tmp_path):
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **kw: pytest.fail("asked the hub"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    # out/sfx with out/ here is a mistyped local path; ./x and a bare name are never ids
    for spec in ("out/sfx", "./LLaDA", "LLaDA-8B-Instruct", "none"):
        assert resolve_model(spec) == ModelSource(spec, spec)


# -----------------------------------------------------------------------------
# the scripts with a hub id: what they record, what a resume keeps


def test_a_run_from_a_hub_id_records_its_commit_and_its_resume_keeps_it(hub, tmp_path):
    env = offline_env(hub)
    data = gsm8k_parquet(tmp_path / "train-00000-of-00001.parquet")
    cmd = ["grpo.py", "--task", "gsm8k", "--data", str(data), "--model-dir", LLADA, *ROUND]
    res = script([*cmd, "--out-dir", str(tmp_path / "run")], env)
    assert res.returncode == 0, res.stderr[-3000:]
    snap = str(hub / f"models--{LLADA.replace('/', '--')}" / "snapshots" / COMMIT_A)
    recorded = json.loads((tmp_path / "run" / "train_args.json").read_text())
    assert (recorded["model_spec"], recorded["model_dir"], recorded["model_revision"]) == (LLADA, snap, COMMIT_A)
    # the hub's main moves on to commit B: a new run takes B, the resumed run keeps A
    write_hub_cache(hub, LLADA, make_tiny(tmp_path / "src-b", seed=1, **SMALL), COMMIT_B)
    res = script([*cmd, "--out-dir", str(tmp_path / "run"), "--resume", "--rounds", "2"], env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads((tmp_path / "run" / "train_args.json").read_text())["model_revision"] == COMMIT_A
    res = script([*cmd, "--out-dir", str(tmp_path / "new")], env)
    assert json.loads((tmp_path / "new" / "train_args.json").read_text())["model_revision"] == COMMIT_B
    # eval.py's manifest says where the weights came from too
    res = script(["eval.py", "--model-dir", LLADA, "--task", "gsm8k", "--data", str(data), "--gen-lengths", "8",
                  "--block-length", "8", "--steps", "2", "--out-dir", str(tmp_path / "eval")], env)
    assert res.returncode == 0, res.stderr[-3000:]
    manifest = json.loads((tmp_path / "eval" / "gsm8k_8" / "manifest.json").read_text())
    assert (manifest["model_spec"], manifest["model_revision"]) == (LLADA, COMMIT_B)


def test_a_real_task_without_model_dir_is_one_line_and_writes_nothing(tmp_path):
    data = gsm8k_parquet(tmp_path / "gsm8k.parquet")
    s1k = tmp_path / "s1k.jsonl"
    s1k.write_text(4 * (json.dumps({"question": "q", "thinking_trajectories": ["t"], "attempt": "a"}) + "\n"))
    work = tmp_path / "work"  # the scripts' cwd: the tiny model would be written under work/out/
    work.mkdir()
    for cmd in (["sft.py", "--task", "s1k", "--data", str(s1k), "--batch-size", "1", "--grad-accum", "1"],
                ["grpo.py", "--task", "gsm8k", "--data", str(data), "--prompts-per-step", "2"],
                ["eval.py", "--task", "gsm8k", "--data", str(data)]):
        res = script([str(REPO / cmd[0]), *cmd[1:]], cwd=work)
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1, res.stderr[-2000:]
        assert "is a real task: give --model-dir" in lines[0] and "Traceback" not in res.stderr
        assert list(work.iterdir()) == []


# -----------------------------------------------------------------------------
# --help, and the toy defaults kept to the toys


def option_blocks(help_text):
    """{option: its help block} from argparse's --help."""
    blocks = re.split(r"\n  (?=-)", help_text.split("\noptions:\n", 1)[1])
    return {b.split()[0].rstrip(","): " ".join(b.split()) for b in blocks if b.strip().startswith("-")}


@pytest.mark.parametrize("argv", [["sft.py"], ["grpo.py"], ["grpo.py", "--preset", "8b"], ["eval.py"]])
def test_help_shows_every_default(argv):
    res = script([*argv, "--help"], env={**os.environ, "COLUMNS": "250"})
    blocks = option_blocks(res.stdout)
    assert len(blocks) > 10
    silent = [opt for opt, text in blocks.items() if opt != "-h" and "default" not in text]
    assert not silent, f"{argv[0]}: no default said for {silent}"


def test_help_says_what_each_preset_sets():
    wide = {**os.environ, "COLUMNS": "250"}
    tiny = option_blocks(script(["grpo.py", "--help"], env=wide).stdout)
    d1 = option_blocks(script(["grpo.py", "--task", "gsm8k", "--help"], env=wide).stdout)
    assert "(default: 0.0001 from --preset tiny; testbed: 0.0001, 8b: 3e-06)" in tiny["--lr"]  # d1's presets only
    assert "(default: 3e-06 from --preset 8b; tiny: 0.0001, testbed: 0.0001)" in d1["--lr"]  # a real task: 8b
    # the field's entry point adds the papers' presets to d1's
    field = option_blocks(script(["-m", "methods.grpo", "--task", "gsm8k", "--help"], env=wide).stdout)
    assert "(default: 3e-06 from --preset 8b; tiny: 0.0001, testbed: 0.0001, justgrpo: 5e-06, " in field["--lr"]
    sft = option_blocks(script(["sft.py", "--task", "s1k", "--help"], env={**os.environ, "COLUMNS": "250"}).stdout)
    assert "(default: 4096 from --task s1k)" in sft["--max-length"]  # a length is the task's, not a preset's


def test_a_real_task_defaults_to_d1s_recipe_and_the_toys_to_theirs():
    assert grpo.parse_args(["--task", "gsm8k"]).preset == "8b"
    assert grpo.parse_args(["--task", "gsm8k,pbe"]).preset == "8b"  # any real task in a mixture
    assert grpo.parse_args(["--task", "pbe"]).preset == "tiny"
    assert grpo.parse_args(["--task", "countdown_toy"]).preset == "testbed"
    args = grpo.parse_args(["--task", "gsm8k", "--preset", "tiny", "--lr", "0.5"])  # given flags win
    assert (args.preset, args.lr, args.gen_length) == ("tiny", 0.5, 256)  # the task's canvas, under any preset
    d1 = grpo.parse_args(["--task", "gsm8k"])
    assert {k: getattr(d1, k) for k in grpo.PRESETS["8b"]} == grpo.PRESETS["8b"]


# -----------------------------------------------------------------------------
# progress inside a round


def test_the_bar_names_each_phase_of_a_round(tmp_path):
    # on a terminal (stderr a pseudo-terminal here; in a pipe or a log the bar is plain lines without phases)
    import fcntl
    import pty
    import struct
    import termios
    model = make_tiny(tmp_path / "tiny", **SMALL)
    ours, theirs = pty.openpty()
    fcntl.ioctl(theirs, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))  # a 200-column terminal
    proc = subprocess.Popen([sys.executable, "grpo.py", "--model-dir", str(model), *ROUND, "--out-dir",
                             str(tmp_path / "run")], cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.DEVNULL, stderr=theirs)
    os.close(theirs)
    err = b""
    while True:
        try:
            chunk = os.read(ours, 65536)
        except OSError:  # EIO: the terminal's other end is closed, the run is over
            break
        if not chunk:
            break
        err += chunk
    os.close(ours)
    assert proc.wait(timeout=600) == 0, err[-3000:]
    phases = re.findall(r"grpo: ([a-z_/]+(?: \d+/\d+)?)", err.decode(errors="replace"))
    # in order, with no repeats of a phase's own state (the bar redraws each one once)
    seen = list(dict.fromkeys(phases))
    assert seen == ["rollout 1/2", "rollout 2/2", "reward", "old_ref", "update 1/2", "update 2/2"]


# -----------------------------------------------------------------------------
# the README's recipe


def readme_commands():
    """The README recipe's commands, continuation lines joined, as token lists (env exports skipped)."""
    text = (REPO / "README.md").read_text()
    block = text.split("## The paper's recipe on 8 GPUs", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = block.replace("\\\n", " ").splitlines()
    return [shlex.split(line, comments=True) for line in lines if line.strip() and not line.startswith(("#", "export"))]


def flag(cmd, name):
    return cmd[cmd.index(name) + 1] if name in cmd else None


def test_readme_recipe_reads_only_what_an_earlier_command_wrote():
    commands = readme_commands()
    written = []  # (script, out-dir, task, gen lengths)
    for cmd in commands:
        if "git" in cmd:
            cmd = cmd[cmd.index("&&") + 1:]  # the rescore line clones d1 first
        # a script (sft.py, grpo.py, eval.py) or a module (python -m lab.evals select|compare ...)
        script_name = cmd[cmd.index("-m") + 1] if "-m" in cmd else next(t for t in cmd if t.endswith(".py"))
        model = flag(cmd, "--model-dir")
        if model and model.startswith("out/"):
            assert any(out == model for s, out, *_ in written if s in ("sft.py", "grpo.py")), f"nothing writes {model}"
        if script_name == "lab.evals" and cmd[cmd.index("lab.evals") + 1] == "select":
            run_dir = cmd[cmd.index("select") + 1]
            assert any(s == "grpo.py" and out == run_dir for s, out, *_ in written), f"nothing writes {run_dir}"
        compared = script_name == "lab.evals" and cmd[cmd.index("lab.evals") + 1] == "compare"
        for path in (cmd[cmd.index("compare") + 1:cmd.index("compare") + 3] if compared else []):
            out, _, run_dir = path.rpartition("/")
            task, gen = run_dir.rsplit("_", 1)
            assert any(s == "eval.py" and o == out and t == task and gen in g.split(",") for s, o, t, g in written), \
                f"no eval writes {path}"
        if "--rescore" in cmd:
            assert flag(cmd, "--rescore").startswith("d1/")  # inside the clone the same line makes
        if script_name == "grpo.py":  # the flags as grpo.py parses them: a real task, so d1's recipe
            args = grpo.parse_args(cmd[cmd.index("grpo.py") + 1:])
            assert args.preset == "8b" and args.model_dir
        written.append((script_name, flag(cmd, "--out-dir"), flag(cmd, "--task"), flag(cmd, "--gen-lengths") or ""))
    assert [s for s, *_ in written].count("eval.py") >= 3  # two evals and the rescore
    assert [s for s, *_ in written].count("lab.evals") == 2  # the selected checkpoint, the comparison
