"""
Stopping politely, for long runs on shared clusters. On SIGTERM, SIGUSR1 or SIGINT (Ctrl-C), or when
--max-hours is about to run out, sft.py and grpo.py finish the step in progress (grpo.py: the round) on
every rank, write a complete save (ops/resume.py), print one line, leave <out-dir>/STOPPED (the reason,
the step, the save) and exit EXIT_STOPPED (75); the same command with `--resume auto` continues bit for
bit (tests/test_preempt.py). eval.py stops at a batch boundary and its --resume continues.

- The decision is collective: one all-reduce at each step's end, so all ranks save the same step.
- A second signal changes nothing: the handler, run by Python in the main thread between two
  bytecodes, only notes the first one, so no save or collective is cut in half by it.
- --max-hours H: the run stops once fewer than BUDGET_STEPS of its longest steps (a save or eval
  included) are left before H hours after the process started.
- Under torchrun a requeue script reads STOPPED; how long the launcher waits before it kills its workers
  (TORCH_ELASTIC_SHUTDOWN_TIMEOUT), and what the first signal's message says of it (launcher_wait):
  docs/reliability.md "Long runs on clusters". Not a script.
"""
import json
import math
import os
import signal
import sys
import time

from ops.ddp import everywhere, finish
from ops.resume import save_dir

EXIT_STOPPED = 75  # sysexits.h's EX_TEMPFAIL, "try again later": a requeue, not a failure (1) or bad input (2)
# SLURM's preemption / scancel, its --signal of choice, and Ctrl-C (directly, or passed on by torchrun)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
SHUTDOWN_ENV = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"  # torchrun's wait between passing a signal on and SIGKILL
SHUTDOWN_DEFAULT_S = 30  # torchrun's default for it, and the fixed wait of torchruns older than 2.12
STOPPED_FILE = "STOPPED"  # in --out-dir once a run stopped early: what a requeue script looks for
BUDGET_STEPS = 2  # --max-hours keeps room for this many of the longest steps seen (one to finish, one spare)
T_PROCESS = time.time()  # the process's start, near enough: when the script imported this module


def launcher_wait(longest):
    """What the stop message adds under torchrun: how long the launcher waits before it kills this
    process, against the longest step so far (`longest` seconds; the save comes on top), and what to
    set when that is too short. "" outside torchrun, where no launcher kills the process."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:  # set by torchrun for its workers
        return ""
    import torch  # its version says whether torchrun reads SHUTDOWN_ENV
    reads = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 12)
    wait = int(os.environ.get(SHUTDOWN_ENV, SHUTDOWN_DEFAULT_S)) if reads else SHUTDOWN_DEFAULT_S
    how = f"{SHUTDOWN_ENV}, default {SHUTDOWN_DEFAULT_S}" if reads else \
        f"torch {torch.__version__} ignores {SHUTDOWN_ENV}"
    note = f"; torchrun kills this process {wait} s after it passed the signal on ({how}); the longest step so " \
           f"far took {longest:.0f} s, and the save comes on top"
    if BUDGET_STEPS * longest < wait:  # room for this step and a save as long again, as --max-hours keeps
        return note
    fix = f"export {SHUTDOWN_ENV}=<seconds> before torchrun" if reads else \
        "signal the workers, not torchrun (kill -TERM <their pids>), or use torch >= 2.12"
    return note + f": this step may be lost (the previous save stays). Next time: {fix}"


class Stopper:
    """The stop signals' handler and the --max-hours clock of one process. requested() is asked at
    the end of every step, on every rank."""

    def __init__(self, max_hours=0.0, out_dir=None, master=True):
        self.signal = None        # the name of the first stop signal received, else None
        self.deadline = T_PROCESS + 3600 * max_hours if max_hours > 0 else math.inf
        self.last = T_PROCESS     # when the previous step ended (the first step's share includes loading)
        self.longest = 0.0        # the longest step so far, in seconds
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_signal)
        if out_dir and master and os.path.exists(os.path.join(out_dir, STOPPED_FILE)):
            os.remove(os.path.join(out_dir, STOPPED_FILE))  # this run goes on: the earlier stop is history

    def _on_signal(self, signum, frame):
        if self.signal is None:  # the first one only: a second signal must not disturb the save
            self.signal = signal.Signals(signum).name
            print(f"[pid {os.getpid()}] {self.signal} received: stopping at the end of this step, after a save"
                  f"{launcher_wait(self.longest)}", file=sys.stderr, flush=True)

    def requested(self, run=None):
        """At the end of a step, on every rank (a collective under torchrun): why the run must stop
        now (a signal's name, or "--max-hours"), or None to go on."""
        now = time.time()
        self.longest, self.last = max(self.longest, now - self.last), now
        out_of_time = now + BUDGET_STEPS * self.longest > self.deadline
        if everywhere(self.signal is None and not out_of_time, run):  # no rank has a reason: go on
            return None
        return self.signal or ("--max-hours" if out_of_time else "a signal to another rank")

    def done_note(self):
        """What the run's last line adds when a stop signal came during its last step: the run finished
        (exit 0, no STOPPED, nothing to resume). A torchrun that got the signal itself (Ctrl-C in its
        terminal) still exits 1: it raises on its own signal once its workers end, whatever they did."""
        if self.signal is None:
            return ""
        launcher = "; a torchrun signalled itself exits 1 all the same" if "TORCHELASTIC_RUN_ID" in os.environ \
            else ""
        return f" ({self.signal} during the last step: the run finished, nothing to resume{launcher})"

    def exit(self, run, metrics_file, out_dir, step, unit, reason):
        """Every rank, once the step's save is written: STOPPED and one line (rank 0), then exit 75."""
        if run.master:
            info = {"reason": reason, unit: step, "save": save_dir(out_dir, step), "exit": EXIT_STOPPED}
            with open(os.path.join(out_dir, STOPPED_FILE), "w") as f:
                json.dump(info, f, indent=2)
            metrics_file.close()
            print(f"stopped by {reason} after {unit} {step}: complete save {info['save']}; the same command with "
                  f"--resume auto (or --resume) continues the run", flush=True)
        finish(run)  # every rank leaves together (ops/ddp.py)
        sys.exit(EXIT_STOPPED)
