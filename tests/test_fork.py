"""
README "Changing d1 itself" as a forker meets it: its example diff (a prompt-mask schedule over
rounds) applies to today's grpo.py in under 20 changed lines, keeps the file inside the layout test's
caps, and the patched script trains: two rounds on the tiny model. The example is checked against the
grpo.py it was written for (EXAMPLE_FOR, its sha256): a fork whose own change to grpo.py touches the
same lines skips these tests with that reason instead of failing; whoever changes grpo.py here updates
the README's example and EXAMPLE_FOR.

Run: python -m pytest tests/test_fork.py -q
"""
import hashlib
import re
import sys

import pytest

from conftest import REPO, run, write_digit_model
from ops.metrics import read_metrics
from test_layout import MAX_LINES, MAX_WIDTH

SECTION = "## Changing d1 itself"
EXAMPLE_FOR = "aa408535f8b72a7e"  # the sha256 (first 16 hex digits) of the grpo.py README's example was written for


def readme_diff():
    """The README section's ```diff block, as its lines."""
    text = (REPO / "README.md").read_text()
    block = re.search(re.escape(SECTION) + r".*?```diff\n(.*?)```", text, re.S)
    assert block, f"README has no diff block under {SECTION!r}"
    return block.group(1).splitlines()


def apply(diff, lines):
    """Apply a context diff without line numbers: a ' ' or '-' line is found at or after the last
    place (a '-' line is then removed), a '+' line is inserted there. Raises if a line is missing."""
    out = list(lines)
    pos = 0
    for line in diff:
        kind, body = line[:1], line[1:]
        if kind == "+":
            out.insert(pos, body)
            pos += 1
            continue
        assert kind in (" ", "-"), f"not a diff line: {line!r}"
        k = out.index(body, pos)  # ValueError: the README's example no longer fits grpo.py
        if kind == "-":
            del out[k]
            pos = k
        else:
            pos = k + 1
    return out


def patched_grpo():
    """grpo.py with README's example applied; skipped where grpo.py is not the file it was written for."""
    text = (REPO / "grpo.py").read_text()
    if hashlib.sha256(text.encode()).hexdigest()[:16] != EXAMPLE_FOR:
        pytest.skip("grpo.py differs from the file README's 'Changing d1 itself' example was written for")
    return apply(readme_diff(), text.splitlines())


def test_the_readme_example_is_small_and_applies():
    changed = [d for d in readme_diff() if d[:1] in "+-"]
    assert 0 < len(changed) < 20
    patched = patched_grpo()
    assert len(patched) <= MAX_LINES and max(len(line) for line in patched) <= MAX_WIDTH
    assert patched != (REPO / "grpo.py").read_text().splitlines()


def test_the_patched_grpo_trains(tmp_path, monkeypatch):
    patched = patched_grpo()
    script = tmp_path / "grpo.py"
    script.write_text("\n".join(patched) + "\n")
    model_dir = tmp_path / "tiny"
    write_digit_model(model_dir)
    out = tmp_path / "grpo"
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the copy's imports come from the checkout
    run([sys.executable, str(script), "--model-dir", str(model_dir), "--out-dir", str(out),
         "--num-examples", "8", "--prompts-per-step", "2", "--groups-per-micro", "2",
         "--num-generations", "3", "--num-iterations", "1", "--diffusion-steps", "4",
         "--rounds", "2", "--lr", "1e-2"], REPO)
    assert [r["step"] for r in read_metrics(str(out))] == [1, 2]
