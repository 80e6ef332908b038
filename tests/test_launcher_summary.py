"""
Every stop a rank makes on purpose is the last field of torchrun's summary too (docs/reliability.md): the
rank writes its one line to torchrun's error file (ops/ddp.tell_launcher), so `torchrun ... | tail` shows
the reason, not "To enable traceback see: ...". Each case runs under a real torchrun on the CPU.

Run: python -m pytest tests/test_launcher_summary.py -q
"""
import os
import re
import subprocess

import pytest

from conftest import REPO, torchrun, write_digit_model
from test_reliability import FAULTS, GRPO, SFT


@pytest.fixture(scope="module")
def digit_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("digit") / "tiny"
    write_digit_model(path)
    return path


def summary(n, fault, script, flags, out):
    """(exit status, the summary's traceback fields, stderr) of torchrun over tests/faults.py."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    res = subprocess.run(torchrun(n) + FAULTS[1:] + [fault, script, *flags, "--out-dir", str(out)], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=300)
    fields = re.findall(r"traceback : (.*)", res.stderr)
    return res.returncode, fields, res.stderr


def test_a_stalled_run_names_its_reason_in_the_summary(tmp_path, digit_model):
    rc, fields, err = summary(1, "nan:5:0", "sft.py", ["--model-dir", str(digit_model), *SFT, "--max-bad-steps", "2"],
                              tmp_path / "run")
    assert rc != 0 and fields, err[-3000:]
    assert "2 optimizer steps in a row had a non-finite loss or gradient norm" in fields[-1], fields
    assert "To enable traceback" not in err


def test_a_failed_save_names_its_reason_in_the_summary(tmp_path, digit_model):
    rc, fields, err = summary(1, "disk-full-in-save:1", "sft.py", ["--model-dir", str(digit_model), *SFT],
                              tmp_path / "run")
    assert rc != 0 and fields, err[-3000:]
    assert fields[-1].startswith("sft.py: error: ") and "save" in fields[-1], fields
    assert "To enable traceback" not in err


def test_a_lost_rank_names_its_reason_in_the_summary(tmp_path, digit_model):
    # rank 1 hangs (SIGSTOP) after its 3rd step: rank 0's next collective times out, it stops with one line
    rc, fields, err = summary(2, "rank-stop:1:3", "grpo.py", ["--model-dir", str(digit_model), *GRPO,
                                                               "--dist-timeout", "5"], tmp_path / "run")
    assert rc != 0 and fields, err[-3000:]
    assert any("stopping: another rank died, hung or lost the network" in f for f in fields), fields
    assert "To enable traceback" not in err


def test_a_refused_input_names_its_reason_in_the_summary(tmp_path, digit_model):
    rc, fields, err = summary(1, "none", "sft.py", ["--model-dir", str(digit_model), *SFT, "--max-steps", "-3"],
                              tmp_path / "run")
    assert rc != 0 and fields, err[-3000:]
    assert fields[-1].startswith("sft.py: error: ") and "--max-steps" in fields[-1], fields
    assert "To enable traceback" not in err
