"""
The task record, `Task`, and the small functions records are built from. tasks.py holds d1's prompt
strings and the registry (TASKS); a task of ours that needs none of d1's rewards keeps its record in
its own module beside its data functions (taskdata/digitsum.py, taskdata/mcq.py), so the registry
grows by one line of tasks.py per task. README "Adding a task" walks through both kinds.

Lengths live in the record, nowhere else: `canvas` (the rollout and eval completion canvas), `block`
and `sft_max_length`; a field left at 0 is d1's (256 / 32 RL, 128 / 256 / 512 eval, 4096 SFT). The
trainers' presets say how big the model and the run are, never a length (ops/trainers.py).
`python tasks.py --lengths --task NAME` measures what a record's lengths must hold.
"""
from dataclasses import dataclass
from typing import Callable

from modelio.tokenizer import prompt_ids

EVAL_PREFILL = "<reasoning>"  # d1's eval opens the assistant turn with it (eval.py: add_reasoning=True)
# d1's lengths (docs/d1.md §2.4, §4.3, §5.3, §8.4): the rollout canvas and block of its train.yaml, its
# SFT sequence, its RL left cut (the LAST 200 prompt tokens), and the eval canvases it reports each
# task at (Table 1)
D1_RL_CANVAS = 256
D1_BLOCK = 32
D1_SFT_LENGTH = 4096
MAX_PROMPT_LENGTH = 200
D1_GEN_LENGTHS = (128, 256, 512)
# the example fields d1's eval parsers read (answer; Countdown's nums / target; Sudoku's grids; the code
# tests): the records of d1's tasks keep these, so --rescore needs no data file
D1_SCORING_FIELDS = ("answer", "nums", "target", "puzzle", "solution", "tests", "program_prefix",
                     "unit_tests")


def with_system(system, question_of):
    """A message that is `system` then the example's question: question_of(example) -> text."""
    return lambda ex: system + question_of(ex)


def question(ex):
    return ex["question"]  # GSM8K question / MATH problem / code problem, verbatim


def each(score):
    """A per-item eval parser as the registry's batched form: (generations, examples) -> [dict]."""
    return lambda generations, examples: [score(g, ex) for g, ex in zip(generations, examples)]


def made_prompt(ex):
    return ex["prompt"]  # a generated toy's bare prompt, which its maker writes


def made_label(ex):
    return ex["completion"]  # a generated toy's SFT label, which its maker writes


def toy_split(split_of, make):
    """A toy's maker: split_of(seed=data_seed) -> (train, test) pools, make(pool, n, seed)."""
    def generate(split, n, seed, data_seed=0, **_):
        return make(split_of(seed=data_seed)[split == "test"], n, seed)
    return generate


def label_lengths(tokenizer, examples):
    """[(prompt tokens, label tokens)] of the labelled examples: the chat-rendered training prompt,
    uncut, and the SFT completion without its end of turn, which a label that fills its room exactly
    leaves out (the Sudoku toy's 16 digits on its 16-token canvas, in its 63-token SFT sequence)."""
    labelled = [ex for ex in examples if "completion" in ex]
    if not labelled:  # gsm8k, ...: RL and eval items without SFT labels
        return []
    labels = tokenizer([ex["completion"] for ex in labelled], add_special_tokens=False)["input_ids"]
    return [(len(prompt_ids(tokenizer, ex["prompt"])), len(ids))
            for ex, ids in zip(labelled, labels)]


def check_canvas(task, tokenizer, examples, canvas, flag):
    """Every label fits the completion canvas (the rollouts' or eval's, `flag` names it): else one
    ValueError naming the longest label and where the length is set. No labels (gsm8k): nothing."""
    labelled = [ex for ex in examples if "completion" in ex]
    lengths = [c for _, c in label_lengths(tokenizer, labelled)]
    if lengths and max(lengths) > canvas:
        ex = labelled[lengths.index(max(lengths))]
        name = ex.get("task", task.split(",")[0])
        raise ValueError(f"{flag} {canvas} is shorter than task {name}'s longest label, "
                         f"{max(lengths)} tokens ({ex['completion'][:40]!r}): raise `canvas` in "
                         f"its record (`python tasks.py --lengths --task {name}` measures it) or "
                         f"give a longer {flag}")


def lengths_report(task, tokenizer, examples, tokenizer_name):
    """(text, ok): what `python tasks.py --lengths` prints, the longest label and prompt + label of
    `examples` under `tokenizer` and the canvas and sft_max_length they need; ok: the record's hold them."""
    sizes = label_lengths(tokenizer, examples)
    if not sizes:
        return f"task {task.name} has no SFT labels: its canvas is d1's", True
    label, total = max(c for _, c in sizes), max(p + c for p, c in sizes)
    fits = lambda n, need: "ok" if n > need else "ok, its end of turn left out" if n == need else "TOO SHORT"
    gen, block, _ = task.rl_lengths()
    return ((f"{task.name}: {len(sizes)} labels, tokenizer of {tokenizer_name}\n"
            f"  longest label {label} tokens + 1 end of turn: canvas >= {label + 1} (in blocks of {block}: "
            f"{-(-(label + 1) // block) * block}); the record's {gen}: {fits(gen, label)}\n"
            f"  longest prompt + label {total} + 1: sft_max_length >= {total + 1}; the record's "
            f"{task.sft_length()}: {fits(task.sft_length(), total)}"),
            gen >= label and task.sft_length() >= total)


@dataclass(frozen=True)
class Task:
    """All the scripts know of one task; a field left at its default is d1's setting or "none"."""
    name: str
    prompt: Callable         # example -> the training user message (d1's RL prompt; s1K's SFT one)
    load: Callable = None    # a file or hub id -> examples (hub column names); None: generated
    make: Callable = None    # toys: (split "train" | "test", n, seed, data_seed, **kw) -> examples
    rewards: tuple = ()      # summed, each with weight 1 (d1's TRL config); () = not an RL task
    max_reward: float = 0.0  # the sum's maximum
    score: Callable = None   # batched eval parser (generations, examples) -> [dict]; None = no eval
    parser_version: str = ""  # in every eval manifest: results of other parser versions do not compare
    scoring_fields: tuple = None  # the example fields `score` reads, kept in each eval record for
    #                               --rescore; None = the whole example
    eval_system: str = None  # d1's eval system prompt; None = evaluated on the training prompt
    eval_question: Callable = question  # example -> the question after it; d1's eval files store it
    eval_prefill: str = EVAL_PREFILL  # follows the assistant header at eval ("" for the bare toys)
    heldout: Callable = None  # a test file's examples -> the indices eval.py scores; None = all
    cells: bool = False      # accuracy: blank-cell micro-average (d1's Sudoku), else solved share
    canvas: int = 0          # rollout and eval completion canvas; 0 = d1's (256 RL, 128/256/512 eval)
    block: int = 0           # the sampler's block; 0 = d1's 32 (a canvas shorter than it: one block)
    sft_max_length: int = 0  # SFT prompt + completion + end-of-turn tokens; 0 = d1's 4096
    sft_completion: Callable = None  # example -> the SFT target text; None = no SFT target
    needs_tags: bool = False  # d1's 4 tags must be single tokens (tiny: modelio.checkpoint --tags)
    preset: str = "tiny"     # the trainers' preset on a CPU-sized model (an 8B-sized one runs d1's "8b")
    code: bool = False       # code benchmark: items carry reference programs (eval.py --canonical)
    eval_batch: int = 0      # eval prompts per batch; 0 = d1's 8 (4 at gen length 512)

    def __post_init__(self):
        # a parser without a version would be compared with other parsers' numbers (manifests keep it)
        if self.score is not None and not self.parser_version:
            raise ValueError(f"task {self.name!r} has an eval parser: give its parser_version")

    def rl_lengths(self, gen_length=0):
        """(gen_length, block_length, diffusion_steps) of its rollouts: the canvas (d1's 256; or
        `gen_length`, one given by hand), the block (d1's 32, at most the canvas), two tokens unmasked
        per step, as d1's 128 steps for 256."""
        gen = gen_length or self.canvas or D1_RL_CANVAS
        return gen, min(self.block or D1_BLOCK, gen), gen // 2

    def sft_length(self):
        return self.sft_max_length or D1_SFT_LENGTH

    def scoring_example(self, ex):
        """What an eval record keeps of `ex` for --rescore: scoring_fields, or all but the prompt (the
        record holds it) and the SFT label."""
        if self.scoring_fields is None:
            return {k: v for k, v in ex.items() if k not in ("prompt", "completion")}
        return {k: ex[k] for k in self.scoring_fields if k in ex}

    def with_prompt(self, ex):
        """An example with its training prompt first (and SFT completion, if the task has one)."""
        out = {"prompt": self.prompt(ex), **ex}
        if self.sft_completion and "completion" not in ex:
            out["completion"] = self.sft_completion(ex)
        return out

    def read_examples(self, path):
        """The examples of the local file or hub dataset id `path`."""
        if self.load is None:
            raise ValueError(f"task {self.name!r} is generated, not read from a file "
                             "(--data is not used)")
        return [self.with_prompt(ex) for ex in self.load(path)]

    def make_examples(self, split, n, seed, data_seed=0, **kw):
        """n examples of this toy from one side ("train" | "test") of its --data-seed split."""
        if self.make is None:
            raise ValueError(f"task {self.name!r} is read from a file: give it --data")
        return [self.with_prompt(ex) for ex in self.make(split, n, seed, data_seed, **kw)]
