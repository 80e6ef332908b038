"""
A run that learned nothing says so (ops/metrics.no_signal_note; docs/reliability.md): every round's groups
scored alike, every advantage 0, and grpo.py's last line says it instead of an ordinary "done".

Run: python -m pytest tests/test_no_signal.py -q
"""
import json
import sys

from conftest import REPO, run, write_digit_model
from modelio.checkpoint import from_pretrained
from ops.metrics import no_signal_note


def write_rounds(path, zero_std):
    """A metrics.jsonl as grpo.py writes it: its settings line, then one line per round."""
    lines = [{"lr": 1e-4, "rounds": len(zero_std)}]
    lines += [{"step": i + 1, "reward": 0.25, "zero_std_groups": z, "grad_norm": 0.0} for i, z in enumerate(zero_std)]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)


def test_the_note_needs_every_round_without_signal(tmp_path):
    note = no_signal_note(write_rounds(tmp_path / "a.jsonl", [1.0, 1.0, 1.0]))
    assert note.startswith("\nnote: the run learned nothing") and "in all 3 rounds" in note
    assert "mean reward 0.250" in note
    assert no_signal_note(write_rounds(tmp_path / "b.jsonl", [1.0, 0.9375, 1.0])) == ""  # one group differed once
    assert no_signal_note(write_rounds(tmp_path / "c.jsonl", [])) == ""  # no round ran: nothing to say


def test_a_greedy_run_learns_nothing_and_says_so(tmp_path):
    # temperature 0: the G completions of a prompt are one greedy decode, equal rewards, every advantage 0;
    # β 0 and no weight decay: the weights cannot move, and the run says why
    model_dir = tmp_path / "tiny"
    write_digit_model(model_dir)
    common = ["--model-dir", str(model_dir), "--num-examples", "16", "--prompts-per-step", "2", "--toy-blanks", "6,8",
              "--groups-per-micro", "2", "--num-generations", "3", "--num-iterations", "1", "--gen-length", "16",
              "--block-length", "16", "--diffusion-steps", "4", "--rounds", "2", "--lr", "1e-2"]
    grpo = [sys.executable, str(REPO / "grpo.py"), *common]
    out = run([*grpo, "--temperature", "0", "--out-dir", str(tmp_path / "greedy")], REPO)
    last = out.strip().splitlines()[-1]
    assert last.startswith("note: the run learned nothing") and "in all 2 rounds" in last, out[-2000:]
    start = from_pretrained(model_dir).state_dict()
    end = from_pretrained(tmp_path / "greedy").state_dict()
    assert all(start[k].equal(end[k]) for k in start)
    # sampled at temperature 1, the same run has groups whose rewards differ: no note
    out = run([*grpo, "--temperature", "1", "--out-dir", str(tmp_path / "sampled")], REPO)
    assert "learned nothing" not in out and out.strip().splitlines()[-1].startswith("done in ")
