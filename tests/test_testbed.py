"""The testbed (taskdata/countdown_toy.py, docs/testbed.md): clean labels that d1's own Countdown reward accepts,
in RL and through eval's scoring, a split by number multiset, reasoning of varying length, the tokenizer
with d1's tags as single tokens, pass@k against enumeration, and the whole path (init -> grpo.py ->
eval.py) at --preset testbed."""
import itertools
import json
import math
import statistics
import sys

import pytest
from conftest import REPO, run

from lab.study_testbed import pass_at
from taskdata import countdown_toy
from tasks import score_eval
from modelio.tokenizer import D1_TAGS, make_tiny_tokenizer
from rewards import countdown_reward


@pytest.fixture(scope="module")
def split():
    return countdown_toy.split_multisets(seed=0)


def test_every_label_is_a_correct_solution_for_d1s_reward_and_eval_parser(split):
    exs = countdown_toy.make_problems(split[0], 300, seed=1)
    for ex in exs:
        assert countdown_reward(ex["completion"], ex) == 1.0, ex
        assert score_eval("countdown_toy", ex["completion"], ex)["correct"], ex
        assert 1 <= ex["target"] <= countdown_toy.MAX_TARGET
        # the reasoning's last line ends in the target, one line per combination of two numbers
        lines = ex["completion"].split("</reasoning>")[0].split("\n")[1:-1]
        assert len(lines) == len(ex["nums"]) - 1 and lines[-1].endswith(f"={ex['target']}")


def test_a_wrong_or_cheating_answer_scores_format_only(split):
    ex = countdown_toy.make_problems(split[0], 1, seed=2)[0]
    nums = ex["nums"]
    # the numbers summed: right multiset, and (unless the target is that sum) the wrong value
    wrong = "+".join(map(str, nums))
    expected = 1.0 if sum(nums) == ex["target"] else 0.1
    assert countdown_reward(f"<answer>{wrong}</answer>", ex) == expected
    # the target written as a bare number uses none of the given numbers
    assert countdown_reward(f"<answer>{ex['target']}</answer>", ex) == 0.1


def test_split_is_by_multiset_and_covers_every_multiset(split):
    train, test = split
    assert not set(train) & set(test)
    assert sorted(train + test) == sorted(countdown_toy.multisets())
    # 2, 3 and 4 numbers from 1..9, with repetition: C(10, 2) + C(11, 3) + C(12, 4)
    assert len(train) + len(test) == math.comb(10, 2) + math.comb(11, 3) + math.comb(12, 4)
    held = {tuple(sorted(ex["nums"])) for ex in countdown_toy.make_problems(test, 200, seed=3)}
    assert held <= set(test)


def test_completion_lengths_vary_by_more_than_a_fifth_of_their_mean(split):
    tok = make_tiny_tokenizer(tags=True)
    exs = countdown_toy.make_problems(split[0], 600, seed=4)
    lengths = [len(tok(ex["completion"], add_special_tokens=False)["input_ids"]) for ex in exs]
    assert statistics.pstdev(lengths) / statistics.mean(lengths) > 0.2
    # every completion fits the preset's 48-token canvas with its <|eot_id|>
    assert max(lengths) + 1 <= 48


def test_problems_have_several_first_steps_that_reach_the_target(split):
    exs = countdown_toy.make_problems(split[0], 100, seed=5)
    starts = [countdown_toy.solutions(ex["nums"], ex["target"]) for ex in exs]
    assert min(starts) >= 1  # the label's own first step is one of them
    assert sum(s > 1 for s in starts) > 30  # many problems can be started in more than one right way


def test_tag_tokenizer_keeps_tags_whole_and_round_trips():
    tok, plain = make_tiny_tokenizer(tags=True), make_tiny_tokenizer()
    text = "<reasoning>\n3*5=15\n</reasoning>\n<answer>\n3*5\n</answer>"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    # four tag tokens after the 262 byte and special ids; everything else one token per byte
    assert sorted(i for i in ids if i >= 262) == [262, 263, 264, 265]
    assert len(ids) == len(text) - sum(len(t) for t in D1_TAGS) + 4
    # the tags are ordinary tokens: decoding without specials (what the rewards read) keeps them
    assert tok.decode(ids, skip_special_tokens=True) == text
    # the default tokenizer is unchanged: 262 tokens, the tags spelled byte by byte
    assert len(plain) == 262 and len(plain(text, add_special_tokens=False)["input_ids"]) == len(text)


def test_pass_at_k_matches_enumeration_of_subsets():
    # pass@k = the share of k-subsets of the n samples that hold at least one correct one
    for n, c, k in [(8, 0, 1), (8, 1, 1), (8, 3, 2), (6, 2, 4), (5, 5, 3), (12, 1, 12)]:
        samples = [True] * c + [False] * (n - c)
        subsets = list(itertools.combinations(samples, k))
        assert pass_at(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))


def test_init_grpo_and_eval_run_at_the_testbed_preset(tmp_path):
    init, out = tmp_path / "init", tmp_path / "grpo"
    run([sys.executable, "-m", "modelio.checkpoint", "--out-dir", str(init), "--tags", "--d-model", "64",
         "--n-layers", "1"], REPO)
    assert json.loads((init / "config.json").read_text())["vocab_size"] == 266
    run([sys.executable, str(REPO / "grpo.py"), "--preset", "testbed", "--model-dir", str(init), "--out-dir",
         str(out), "--rounds", "1", "--prompts-per-step", "2", "--groups-per-micro", "2", "--num-iterations", "1",
         "--diffusion-steps", "6", "--num-examples", "8", "--eval-every", "1", "--test-curve", "--eval-items", "4"], REPO)
    rec = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert {"heldout_acc", "train_acc"} <= set(rec[-1]) and rec[-1]["completion_len"] > 0
    run([sys.executable, str(REPO / "eval.py"), "--task", "countdown_toy", "--model-dir", str(out), "--toy-items",
         "4", "--steps", "6", "--out-dir", str(tmp_path / "eval"), "--json", str(tmp_path / "eval.json")], REPO)
    res = json.loads((tmp_path / "eval.json").read_text())[0]
    assert res["gen_length"] == 48 and res["items"] == 4
