"""
Multiple choice read from a file (taskdata/mcq.py), README "Adding a task"'s second worked example:
its reader on ai2_arc-shaped jsonl and parquet against hand-written records, the reward and parser
against a hand count, --rescore against the live parser, and the README's commands run as written
(with small sizes appended), from sample files to the held-out table.

Run: .venv/bin/python -m pytest tests/test_mcq.py -q
"""
import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tasks
from conftest import REPO, run_recipe
from ops.results import score_batch
from taskdata import mcq
from taskdata.task import Task, each

ARC = [{"id": "Mercury_1", "question": "Which gas do plants take in?",
        "choices": {"text": ["oxygen", "carbon dioxide", "helium"], "label": ["A", "B", "C"]},
        "answerKey": "B"},
       {"id": "Mercury_2", "question": "What melts ice?",
        "choices": {"text": ["heat", "cold", "dark", "wind"], "label": ["1", "2", "3", "4"]},
        "answerKey": "1"}]


@pytest.fixture(params=["jsonl", "parquet"])
def arc_file(tmp_path, request):
    path = tmp_path / f"arc.{request.param}"
    if request.param == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in ARC))
    else:
        pq.write_table(pa.Table.from_pylist(ARC), path)
    return path


def test_the_reader_gives_the_records_as_written_in_jsonl_and_parquet(arc_file):
    exs = tasks.load_task("mcq", arc_file)
    assert [ex["answer"] for ex in exs] == ["B", "1"] and exs[0]["answer_text"] == "carbon dioxide"
    assert exs[0]["prompt"] == ("Which gas do plants take in?\nA. oxygen\nB. carbon dioxide\nC. helium\n"
                                "Answer with the letter of the correct choice.")
    assert exs[1]["completion"] == "<reasoning>\nheat\n</reasoning>\n<answer>\n1\n</answer>"


def test_a_key_that_names_no_choice_is_one_line_naming_the_record(tmp_path):
    bad = dict(ARC[0], answerKey="D")
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(ARC[1]) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: answerKey 'D' must be one of the 3 labels"):
        tasks.load_task("mcq", path)


def item(answer, labels="ABC"):
    """An example as read_mcq gives it, with its prompt and label."""
    return tasks.with_prompt("mcq", {"question": "q", "labels": list(labels), "texts": list("xyzw")[:len(labels)],
                                     "answer": answer, "answer_text": "y"})


def test_reward_and_parser_agree_with_a_hand_count():
    ex = item("B")
    cases = {"<answer>\nB\n</answer>": (1.0, "B", True), "<answer>A</answer>": (0.0, "A", False),
             "<answer>D</answer>": (0.0, None, False), "B": (0.0, None, False),
             "<answer>A</answer> then <answer> B </answer>": (1.0, "B", True)}
    for text, (reward, pred, correct) in cases.items():
        assert tasks.total_reward("mcq", text, ex)[0] == reward, text
        assert tasks.score_eval("mcq", text, ex) == {"pred": pred, "correct": correct, "score": float(correct)}


def test_rescore_reads_what_the_records_keep_and_names_a_field_they_do_not():
    exs = [item(a, "ABCD") for a in "ABCD"]
    gens = ["<answer>A</answer>", "<answer>B</answer>", "<answer>E</answer>", "none"]
    live = tasks.score_eval_batch("mcq", gens, exs)
    kept = [tasks.get("mcq").scoring_example(ex) for ex in exs]
    assert all(set(k) == {"answer", "labels"} for k in kept)
    assert tasks.score_eval_batch("mcq", gens, kept) == live
    assert [r["correct"] for r in live] == [True, True, False, False]
    # a record that keeps too little: one line, not a bare KeyError
    short = Task(name="short", prompt=mcq.mcq_prompt, score=each(mcq.score), parser_version="t-1",
                 scoring_fields=("answer",))
    with pytest.raises(ValueError, match="short's eval parser reads the example's field 'labels'.*scoring_fields"):
        score_batch({"short": short}, "short", gens, [short.scoring_example(ex) for ex in exs])


def readme_commands():
    text = (REPO / "README.md").read_text()
    section = text[text.index("**A task read from a file"):text.index("## The paper's recipe")]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


# small sizes appended to each README command: the same commands, seconds instead of minutes
SMALL = {"taskdata.mcq": ["--train", "64", "--test", "8"], "modelio.checkpoint": ["--d-model", "64", "--n-layers", "1"],
         "tasks.py": [],
         "sft.py": ["--max-steps", "4", "--batch-size", "8", "--eval-every", "4"],
         "grpo.py": ["--rounds", "1", "--prompts-per-step", "2", "--groups-per-micro", "2", "--num-iterations", "1"],
         "eval.py": []}


def test_the_readme_commands_run_from_sample_files_to_the_table(tmp_path):
    out = run_recipe(readme_commands(), "out/mcq", tmp_path, SMALL)["tasks.py"]
    # tasks.py --lengths: the record's lengths hold every label of the sample file
    assert "canvas >= 49" in out and "the record's 64: ok" in out, out
    # eval.py ran the record's canvas (64) on the 8 items of the parquet file
    (res,) = json.loads((tmp_path / "eval.json").read_text())
    assert res["task"] == "mcq" and res["gen_length"] == 64 and res["items"] == 8
    manifest = json.loads(next((tmp_path / "eval").rglob("manifest.json")).read_text())
    assert manifest["parser_version"] == "mcq-1"
    record = json.loads(next((tmp_path / "eval").rglob("*.jsonl")).read_text().splitlines()[0])
    assert set(record["example"]) == {"answer", "labels"}
