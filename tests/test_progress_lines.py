"""
Progress off a terminal (docs/reliability.md): in a log file or a pipe, ops/metrics.progress writes plain
lines (a few a run, and the last step), never tqdm's `\\r` redraws of one line tens of kilobytes long, so a
stop's line stands on its own line after them.

Run: python -m pytest tests/test_progress_lines.py -q
"""
import subprocess
import sys

from conftest import REPO
from ops.metrics import PlainProgress
from test_reliability import SFT


def test_plain_progress_writes_a_few_whole_lines(capsys):
    bar = PlainProgress(range(100), "sft", 100)
    seen = []
    for step in bar:
        seen.append(step)
        bar.set_postfix(loss=f"{step:.3f}")
        bar.set_description_str("sft: phase")  # a terminal's detail: no line of its own
    bar.write("step 100: eval loss 1.0")
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert seen == list(range(100)) and 0 < len(lines) <= PlainProgress.LINES + 1, lines
    assert lines[-1].startswith("sft: 100/100 [") and lines[-1].endswith("loss=99.000"), lines[-1]
    assert "\r" not in err and out == "step 100: eval loss 1.0\n"


def test_a_run_in_a_pipe_logs_plain_lines(tmp_path):
    model = tmp_path / "tiny"
    subprocess.run([sys.executable, "-m", "modelio.checkpoint", "--out-dir", str(model), "--seed", "0"], cwd=REPO,
                   check=True, capture_output=True)
    res = subprocess.run([sys.executable, str(REPO / "sft.py"), "--model-dir", str(model), *SFT,
                          "--out-dir", str(tmp_path / "run")], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "\r" not in res.stderr and "\r" not in res.stdout
    assert any(line.startswith("sft: 6/6 [") for line in res.stderr.splitlines()), res.stderr[-2000:]
