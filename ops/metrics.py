"""
Metrics as data: every training script writes one JSON line per step (sft.py) or round (grpo.py)
to <out-dir>/metrics.jsonl, beside <out-dir>/train_args.json (the resolved flags and world size),
so a run can be plotted, compared and re-analysed without parsing its console output.

A line is a flat dict of numbers with "step" (the optimizer step or round, 1-based) and
"elapsed_s" (wall-clock seconds since the run started, resumes included). Only rank 0 writes. A
resumed run keeps the lines up to the step it resumes from and writes the rest again, so the file
always describes one run.

--wandb PROJECT also streams each record to Weights & Biases, as d1's TRL set-up reports (optional:
`pip install wandb`; WANDB_MODE=offline needs no network). Nothing changes without the flag.

Draw any metrics files side by side (matplotlib is optional: only the picture needs it), or
print each key's first and last value per run as a table:
    python -m ops.metrics out/grpo out/grpo-fixed-mask --keys reward,kl --x step --out out/compare.png
    python -m ops.metrics out/grpo out/grpo-fixed-mask --keys val_acc,token_nll --table
"""
import argparse
import json
import os
import sys
import time
from contextlib import contextmanager

import torch
from tqdm import tqdm

from sandbox import contain

METRICS_FILE = "metrics.jsonl"
ARGS_FILE = "train_args.json"


def progress(iterable=None, show=True, **kwargs):
    """A tqdm bar that only `show` draws (rank 0, or a --progress flag), and that TQDM_DISABLE=1 and
    the other TQDM_* variables still control: tqdm reads them only for arguments not passed, so
    `disable` is passed only to hide the bar. Where stderr is no terminal (a log file, a pipe, a
    cluster's job output) a bar's redraws would be `\r` segments of one line tens of kilobytes long:
    there PlainProgress writes plain lines instead."""
    if not show:
        return tqdm(iterable, disable=True, **kwargs)
    plain = "file" not in kwargs and not sys.stderr.isatty()  # a bar given its own file draws there
    if plain and os.environ.get("TQDM_DISABLE", "0") in ("", "0"):
        return PlainProgress(iterable, kwargs.get("desc", ""), kwargs.get("total"), kwargs.get("initial", 0))
    return tqdm(iterable, **kwargs)


class PlainProgress:
    """progress() off a terminal: what tqdm's bar shows, as one plain stderr line at most every EVERY_S
    seconds or LINES times a run, and at the last step; the bar's interface that the scripts use
    (iteration, set_postfix, set_description_str, write, close). Lines a script writes through it
    (bar.write: a round's metrics) go to stdout whole, as tqdm.write's do."""
    EVERY_S = 60.0
    LINES = 20
    disable = False  # tqdm's attribute: this one is shown

    def __init__(self, iterable, desc, total, initial=0):
        self.iterable = iterable
        self.desc = desc
        self.postfix = ""
        self.total = total if total is not None else len(iterable)
        self.n = initial
        self.start = initial
        self.t0 = time.time()
        self.last = self.t0

    def __iter__(self):
        every = max(1, (self.total - self.start) // self.LINES)
        for item in self.iterable:
            yield item
            self.n += 1
            now = time.time()
            if now - self.last >= self.EVERY_S or (self.n - self.start) % every == 0 or self.n == self.total:
                self.last = now
                rate = (self.n - self.start) / max(now - self.t0, 1e-9)
                print(f"{self.desc}: {self.n}/{self.total} [{now - self.t0:.0f} s, {rate:.2f}/s]"
                      f"{' ' + self.postfix if self.postfix else ''}", file=sys.stderr, flush=True)

    def set_postfix(self, **kw):
        self.postfix = ", ".join(f"{k}={v}" for k, v in kw.items())

    def set_description_str(self, desc, refresh=True):
        pass  # the phase within a step: a terminal's detail, not a log line

    def write(self, text):
        print(text, flush=True)

    def close(self):
        pass


@contextmanager
def timed(timing, phase, bar=None):
    """Time the block into timing[phase] (seconds); with a progress bar, show the phase on it."""
    if bar is not None:
        bar.set_description_str(f"grpo: {phase}")
    t0 = time.time()
    yield
    timing[phase] = time.time() - t0


def distinct_share(completion, mask, G):
    """Mean over groups of (distinct completions / G), completions (B, N) compared up to and
    including their first EOS (mask (B, N)): 1 when every sibling differs, 1/G when all are equal."""
    # what follows the first EOS is padding the loss never sees: blanked so it cannot make two answers differ
    rows = torch.where(mask.bool(), completion, -1).view(-1, G, completion.shape[1])  # (groups, G, N)
    return sum(len(torch.unique(g, dim=0)) for g in rows) / (len(rows) * G)


def round_metrics(batches, G, update_stats, reward_parts):
    """One round's log line, this rank's share: mean reward, the mean within-group std of the
    rewards, the share of groups whose rewards are all equal (zero advantage: no learning signal),
    the share of distinct completions in a group, the mean completion length, the sampler's model
    calls per rollout, the update's statistics, each reward function's mean (`reward_parts`: sums
    over the completions), and token_nll: the mean -log π_old(o_k | q') of the sampled tokens
    under the first mask seed, an entropy proxy watched for collapse."""
    rewards = torch.cat([b.rewards for b in batches])  # (local completions,)
    # d1's reward_std and zero_std_ratio (same 1e-6): a group with std 0 gives no surrogate gradient
    group_std = rewards.view(-1, G).std(dim=1)  # (local groups,)
    # every micro-batch holds the same number of groups, so the mean of their means is the mean over groups
    distinct = sum(distinct_share(b.completion, b.mask, G) for b in batches) / len(batches)
    nll = {}
    if batches[0].old and batches[0].old[0].shape == batches[0].mask.shape:  # per-token, (b, N) each
        tokens = sum(b.mask.sum() for b in batches).clamp(min=1)
        nll = {"token_nll": (-sum((b.old[0] * b.mask).sum() for b in batches) / tokens).item()}
    return {"reward": rewards.mean().item(), "reward_std": group_std.mean().item(),
            "zero_std_groups": (group_std < 1e-6).float().mean().item(), "distinct": distinct,
            "completion_len": torch.cat([b.mask.sum(1) for b in batches]).mean().item(),
            "rollout_calls": sum(b.record["model_calls"] for b in batches) / len(batches),
            **nll, **update_stats, **{f"r/{k}": v / len(rewards) for k, v in reward_parts.items()}}


def eval_due(step, every, last):
    """Whether grpo.py --eval-every N measures after round `step`: every N rounds (round 0, the start
    model, included) and at the last one."""
    return step % every == 0 or step == last


def report_round(bar, f, step, metrics, timing, curve, elapsed, n_cut=0):
    """Rank 0's report of one grpo.py round: a console line (the metrics, then seconds per phase),
    the bar's reward, and the round's line in metrics.jsonl: metrics, phase seconds as s_<phase>,
    and the --eval-every curve (ops/validation.ValCurve) when it is due. n_cut: this
    rank's prompts cut to --max-prompt-length, a warning."""
    if n_cut:
        bar.write(f"warning: {n_cut} prompts longer than --max-prompt-length were cut from the left")
    bar.write(f"round {step}: " + " ".join(f"{k} {v:.3f}" for k, v in metrics.items()) +
              " | s/phase " + " ".join(f"{k} {v:.1f}" for k, v in timing.items()))
    bar.set_postfix(reward=f"{metrics['reward']:.3f}")
    record = {"step": step, "elapsed_s": elapsed, **metrics, **{f"s_{k}": v for k, v in timing.items()}}
    if contain.decided() is not None:  # the code rewards' isolation (sandbox/contain.py), on every line
        record["sandbox"] = contain.decided()
    if curve and curve.due(step):  # `elapsed` was read before it: elapsed_s stays training time
        record.update(curve())
        bar.write(f"round {step}: accuracy % " + " ".join(f"{k} {record[k]:.1f}" for k in curve.sets))
    log_metrics(f, record)


def no_signal_note(path):
    """A grpo.py run's last line when no round had a learning signal (metrics.jsonl at `path`, every round of
    the run, resumed ones too): every group's G completions scored alike (zero_std_groups 1 in each round),
    so every advantage A = r - mean(r) was 0 and the policy gradient with it; only the KL term and weight
    decay could move a weight. "" when some round had one."""
    rounds = [r for r in read_metrics(path) if "zero_std_groups" in r]
    if not rounds or any(r["zero_std_groups"] < 1.0 for r in rounds):
        return ""
    reward = sum(r["reward"] for r in rounds) / len(rounds)
    return (f"\nnote: the run learned nothing from its rewards: in all {len(rounds)} rounds every group's "
            f"completions scored alike (zero_std_groups 1.000, mean reward {reward:.3f}), so every advantage "
            f"was 0. The task is out of this model's reach (or too easy for it): an SFT start model, another "
            f"--gen-length or --temperature spread the rewards")


def mean_over_ranks(metrics, run):
    """A dict of floats averaged over the ranks with one all_reduce (each rank scored equally many
    items, so the mean of the ranks' means is the global mean); as is in one process."""
    if not run.distributed:
        return metrics
    import torch.distributed as dist
    vals = torch.tensor(list(metrics.values()), device=run.device)
    dist.all_reduce(vals, op=dist.ReduceOp.AVG)
    return dict(zip(metrics, vals.tolist()))


def read_json(path):
    with open(path) as f:
        return json.load(f)


class StreamedFile:
    """metrics.jsonl, whose every record log_metrics also sends to a Weights & Biases run (--wandb)."""

    def __init__(self, f, stream):
        self.f, self.stream, self.name = f, stream, f.name

    def write(self, text):
        return self.f.write(text)

    def flush(self):
        self.f.flush()

    def close(self):
        self.f.close()
        self.stream.finish()


def start_stream(project, out_dir, config, resumed_id=None):
    """A wandb run in `project` that receives metrics.jsonl's records; a resume continues the same
    wandb run (its id is kept in train_args.json). The import happens only here: wandb is optional."""
    import secrets

    import wandb
    run_id = resumed_id or secrets.token_hex(4)  # wandb's run ids: lowercase letters and digits
    config["wandb_id"] = run_id  # written into train_args.json by the caller
    # dir: wandb's own files (offline runs: `wandb sync <out-dir>/wandb/offline-run-*` later)
    return wandb.init(project=project, id=run_id, resume="allow", dir=out_dir, config=config,
                      name=os.path.basename(os.path.abspath(out_dir)))


def open_metrics(out_dir, config, start_step=0):
    """(the metrics file of a run opened for appending, the elapsed_s it had reached), with the
    config written beside it. Lines with step > start_step are dropped first (start_step = 0:
    a fresh run, all of them). config["wandb"]: the records are also streamed (start_stream)."""
    os.makedirs(out_dir, exist_ok=True)
    args_file, stream = os.path.join(out_dir, ARGS_FILE), None
    if config.get("wandb"):
        previous = read_json(args_file) if start_step and os.path.exists(args_file) else {}
        stream = start_stream(config["wandb"], out_dir, config, previous.get("wandb_id"))
    with open(args_file, "w") as f:
        json.dump(config, f, indent=2)
    path = os.path.join(out_dir, METRICS_FILE)
    # keep what the resumed-from state had already logged; drop steps it will redo (or everything when fresh)
    kept = [r for r in read_metrics(out_dir) if r["step"] <= start_step] if start_step and os.path.exists(path) else []
    with open(path + ".tmp", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in kept)
    os.replace(path + ".tmp", path)  # never half a file
    f = open(path, "a") if stream is None else StreamedFile(open(path, "a"), stream)
    # a resumed run's clock continues from its last kept line
    return f, (kept[-1].get("elapsed_s", 0.0) if kept else 0.0)


def first_last(rows, key):
    """(first, last) value of `key` over a run's lines that have it, or (None, None)."""
    vals = [r[key] for r in rows if key in r]
    return (vals[0], vals[-1]) if vals else (None, None)


def log_metrics(f, record):
    """One line, flushed at once: a crash loses no line that was logged. With --wandb the record is
    streamed too (wandb keeps the first record of a step: a resume's redone steps are not re-sent)."""
    f.write(json.dumps(record) + "\n")
    f.flush()
    if isinstance(f, StreamedFile):
        f.stream.log(record, step=record["step"])


def read_metrics(out_dir):
    """[dict] from <out_dir>/metrics.jsonl (or a path to the file itself); a torn last line
    (a crash mid-write) is skipped."""
    path = out_dir if out_dir.endswith(".jsonl") else os.path.join(out_dir, METRICS_FILE)
    rows = []
    with open(path) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="draw metrics.jsonl files side by side")
    parser.add_argument("runs", nargs="+", help="run directories (or metrics.jsonl files)")
    parser.add_argument("--keys", type=str, default="reward,loss", help="comma-separated metrics, one panel each")
    parser.add_argument("--x", type=str, default="step", help="x axis: step or elapsed_s")
    parser.add_argument("--out", type=str, default="out/metrics.png", help="the picture to write")
    parser.add_argument("--table", action="store_true", help="print first -> last of each key instead of drawing")
    args = parser.parse_args()
    keys = args.keys.split(",")
    if args.table:
        width = max(len(r) for r in args.runs)
        print(f"{'run':<{width}}  " + "  ".join(f"{k + ' first -> last':>26}" for k in keys))
        for run in args.runs:
            cells = []
            for k in keys:
                a, b = first_last(read_metrics(run), k)
                cells.append(f"{'—':>26}" if a is None else f"{a:>12.3f} -> {b:<10.3f}")
            print(f"{run:<{width}}  " + "  ".join(cells))
        raise SystemExit(0)
    try:
        import matplotlib
        matplotlib.use("Agg")  # files only, no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("metrics.py draws with matplotlib, an optional dependency: pip install matplotlib")
    fig, axes = plt.subplots(1, len(keys), figsize=(4.5 * len(keys), 3.5), squeeze=False)
    for run in args.runs:
        rows = read_metrics(run)
        for ax, key in zip(axes[0], keys):
            pts = [(r[args.x], r[key]) for r in rows if key in r and args.x in r]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=run)
    for ax, key in zip(axes[0], keys):
        ax.set_title(key)
        ax.set_xlabel(args.x)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")
