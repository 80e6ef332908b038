"""
lab/rank_objectives.py without training: every objective's flags parse on the toy and pass the objective's
own check, every objective gets the same rollout budget, and the table reads lab.compare's summaries right.

Run: python -m pytest tests/test_rank_objectives.py -q
"""
import math
import shlex

import methods.grpo
from lab import rank_objectives as rank


def test_every_objective_runs_on_the_toy_with_the_same_rollout_budget():
    budgets = set()
    for name, flags in rank.OBJECTIVES.items():
        args = methods.grpo.parse_args(["--task", "toy"] + shlex.split(flags))
        assert args.objective == name
        methods.grpo.check(args, methods.grpo.objective_of(args))  # raises on flags the objective refuses
        budgets.add((args.rounds, args.prompts_per_step, args.num_generations))
    assert budgets == {(30, 16, 6)}  # the toy preset's: 30 rounds x 16 prompts x G 6 for every objective
    assert rank.budget() == (30, 30 * 16 * 6)


def test_rows_and_table_from_compare_summaries():
    # lab.compare's summary: A = diffu-GRPO, B = the objective; updates["B"] from its run's metrics
    summary = {"seeds": [0, 1, 2, 3, 4], "acc_a": [20.0] * 5, "acc_b": [22.0, 24.0, 20.0, 26.0, 23.0],
               "mean_a": 20.0, "mean_b": 23.0, "mean": 3.0, "ci": [0.5, 5.5],
               "updates": {"A": {"rounds": 150, "train_s": 150.0}, "B": {"rounds": 150, "train_s": 300.0}}}
    r = rank.row("wd1", summary)
    assert (r["acc"], r["diff"], r["ci"], r["baseline"]) == (23.0, 3.0, [0.5, 5.5], 20.0)
    assert r["s_per_round"] == 300.0 / (150 / 5)  # each seed's run: 30 rounds in 300 s
    sft = rank.row("sft", {**summary, "mean_b": 1.0, "mean": -19.0, "ci": [-21.0, -17.0],
                           "updates": {"A": summary["updates"]["A"], "B": None}})
    assert sft["rounds"] == 0 and math.isnan(sft["s_per_round"])
    text = rank.table([sft, r], 20.0)
    assert "| diffu_grpo | 20.0 | 0 | 30 | 2880 | 5.0 |" in text  # its runs: 150 s for 30 rounds
    assert "| wd1 | 23.0 | +3.0 [+0.5, +5.5] | 30 | 2880 | 10.0 |" in text
    assert "| sft | 1.0 | -19.0 [-21.0, -17.0] | 0 | 0 | – |" in text
