"""
The digit-sum toy (taskdata/digitsum.py), README "Adding a task"'s worked example: its maker, reward
and parser against an independent computation, its record as the README prints it, and the README's
commands run as written (with small sizes), from the tiny model to the held-out table.

Run: .venv/bin/python -m pytest tests/test_digitsum.py -q
"""
import json
import re

import tasks
from conftest import REPO, run_recipe
from taskdata import digitsum


def test_split_is_disjoint_and_covers_every_number():
    train, test = digitsum.split_numbers(seed=0)
    assert not set(train) & set(test) and sorted(train + test) == list(digitsum.NUMBERS)
    assert len(test) == round(0.2 * len(digitsum.NUMBERS)) and digitsum.split_numbers(seed=1) != (train, test)


def test_labels_earn_the_reward_and_other_answers_do_not():
    train, test = digitsum.split_numbers(seed=0)
    for ex in tasks.make_examples("digitsum", "train", 200, seed=3):
        digits = str(ex["number"])
        total = 0
        for d in digits:  # the sum by a plain loop, not the maker's expression
            total += int(d)
        assert ex["number"] in train and ex["prompt"] == f"Digit sum: {digits}" and ex["answer"] == str(total)
        assert ex["completion"].split("\n")[1] == "+".join(digits) + f"={total}"
        assert tasks.total_reward("digitsum", ex["completion"], ex) == (1.0, {"digitsum_reward": 1.0})
        wrong = ex["completion"].replace(f"<answer>\n{total}\n", f"<answer>\n{total + 1}\n")
        assert tasks.total_reward("digitsum", wrong, ex)[0] == 0.0
        assert tasks.score_eval("digitsum", ex["completion"], ex) == {"pred": f"\n{total}\n", "correct": True,
                                                                      "score": 1.0}
        assert tasks.score_eval("digitsum", "no tags", ex)["correct"] is False
    assert all(i in range(200) and ex["number"] in test for i, ex in tasks.heldout("digitsum", n=200))


def readme_section():
    """README "Adding a task"'s first worked example (the second, a task read from a file, is
    tests/test_mcq.py's)."""
    text = (REPO / "README.md").read_text()
    return text[text.index("## Adding a task"):text.index("**A task read from a file")]


def test_the_readme_prints_the_record_as_it_is():
    record = re.search(r"```python\n(.*?)```", readme_section(), re.S).group(1)
    lines = [line.strip() for line in record.strip().splitlines()]
    source = [line.strip() for line in (REPO / "taskdata" / "digitsum.py").read_text().splitlines()]
    start = source.index(lines[0])
    assert source[start:start + len(lines)] == lines


# small sizes appended to each README command: the same commands, seconds instead of minutes
SMALL = {"modelio.checkpoint": ["--d-model", "64", "--n-layers", "1"],
         "sft.py": ["--max-steps", "4", "--num-examples", "32", "--batch-size", "8", "--eval-every", "4"],
         "grpo.py": ["--rounds", "1", "--prompts-per-step", "2", "--groups-per-micro", "2", "--num-iterations", "1",
                     "--num-examples", "8"],
         "eval.py": ["--toy-items", "8"], "tasks.py": []}


def test_the_readme_commands_run_from_the_tiny_model_to_the_table(tmp_path):
    run_recipe(re.findall(r"```bash\n(.*?)```", readme_section(), re.S)[0], "out/ds", tmp_path, SMALL)
    # eval.py ran the record's canvas (32) on 8 held-out numbers, and every stage left its model
    (res,) = json.loads((tmp_path / "eval.json").read_text())
    assert res["task"] == "digitsum" and res["gen_length"] == 32 and res["items"] == 8
    assert all((tmp_path / d / "config.json").is_file() for d in ("init", "sft", "grpo"))
