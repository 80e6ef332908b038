"""
Run an entry script with a fault injected at an exact moment, for tests/test_reliability.py. The
project's code has no test hooks: the fault is a monkeypatch applied before the script runs (runpy
executes it as __main__, and its `from module import name` lines then pick up the patched names).

    python tests/faults.py FAULT script.py [script flags...]
    torchrun --nproc_per_node=2 tests/faults.py FAULT grpo.py ...      # per-rank faults

FAULT is one of (K counts from 1; RANK is the torchrun rank, 0 without torchrun):
    kill-in-save:K          SIGKILL during the K-th save, after the weights are written and before
                            the trainer state (resume.save_merged returns, then the kill)
    kill-before-rename:K    SIGKILL after every file of the K-th save is written and flushed,
                            before the directory is renamed into place
    kill-in-publish:K       SIGKILL half way through the K-th publish of the run's model (config.json
                            removed, some files linked)
    kill-after-step:K       SIGKILL right after the K-th optimizer step (taken or skipped)
    kill-in-generate:K      SIGKILL at the K-th call of the sampler (eval.py: in the K-th batch)
    nan:K[:N]               the K-th .. (K+N-1)-th forward passes with gradients return NaN logits
                            (N = 1 by default; N = 0 means from the K-th on, for good)
    rank-kill:R:K           rank R SIGKILLs itself after its K-th optimizer step (a crashed node)
    rank-stop:R:K           rank R SIGSTOPs itself after its K-th optimizer step (a hung node)
    term-after-step:K[:R]   SIGTERM (a cluster's stop) right after the K-th optimizer step, on rank R only if given
    term-in-save:K          SIGTERM during the K-th save, after the weights are written
    term-in-generate:K      SIGTERM at the K-th call of the sampler, before it samples (eval.py: the K-th batch)
    int-launcher-after-step:K   rank 0 sends SIGINT to its parent, the launcher, right after its K-th optimizer
                            step: Ctrl-C in the terminal of a torchrun, whose workers run in sessions of their own
    slow-save:S             every save sleeps S seconds once its weights are written (an 8B save takes minutes)
    disk-full-in-save:K     the disk is full during the K-th save: once its weights are written, the next
                            write fails with ENOSPC (errno 28)
    disk-free:N             shutil.disk_usage reports N bytes free (the up-front room check)
    none                    no fault (the same code path, for the uninterrupted reference run)
Faults joined by "+" are all injected (term-after-step:3+term-in-save:1: a second SIGTERM during the stop's save).
"""
import os
import runpy
import signal
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def die(sig=signal.SIGKILL):
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), sig)


def counting(fn, k, after):
    """fn, whose k-th call (from 1) runs `after(result)` once it has returned."""
    calls = [0]

    def wrapped(*a, **kw):
        out = fn(*a, **kw)
        calls[0] += 1
        if calls[0] == k:
            after(out)
        return out
    return wrapped


def counting_before(fn, k, before):
    """fn, whose k-th call (from 1) runs `before()` first."""
    calls = [0]

    def wrapped(*a, **kw):
        calls[0] += 1
        if calls[0] == k:
            before()
        return fn(*a, **kw)
    return wrapped


def inject(fault, rank):
    kind, *nums = fault.split(":")
    nums = [int(n) for n in nums]
    from ops import ddp, resume
    if kind == "kill-in-save":
        resume.save_merged = counting(resume.save_merged, nums[0], lambda _: die())
    elif kind == "kill-before-rename":
        resume._fsync_dir_tree = counting(resume._fsync_dir_tree, nums[0], lambda _: die())
    elif kind == "kill-in-publish":
        publish, calls = resume.publish, [0]

        def half_publish(src, out_dir):
            calls[0] += 1
            if calls[0] == nums[0]:  # publish removes the top config.json first; the kill comes at the 2nd link
                real_link, links = os.link, [0]

                def link(a, b):
                    real_link(a, b)
                    links[0] += 1
                    if links[0] == 2:
                        die()
                os.link = link
            return publish(src, out_dir)
        resume.publish = half_publish
    elif kind == "kill-after-step":
        ddp.step_if_finite = counting(ddp.step_if_finite, nums[0], lambda _: die())
    elif kind == "kill-in-generate":  # before the batch's samples exist: that batch is lost
        import sample
        sample.generate = counting_before(sample.generate, nums[0], die)
    elif kind in ("rank-kill", "rank-stop") and rank == nums[0]:
        sig = signal.SIGKILL if kind == "rank-kill" else signal.SIGSTOP
        ddp.step_if_finite = counting(ddp.step_if_finite, nums[1], lambda _: die(sig))
    elif kind == "nan":
        import torch

        import model
        first, n = nums[0], (nums[1] if len(nums) > 1 else 1)
        forward, calls = model.LLaDA.forward, [0]

        def nan_forward(self, *a, **kw):
            out = forward(self, *a, **kw)
            if torch.is_grad_enabled():
                calls[0] += 1
                if calls[0] >= first and (n == 0 or calls[0] < first + n):
                    out = out * float("nan")  # NaN logits, still attached to the graph: NaN loss and gradients
            return out
        model.LLaDA.forward = nan_forward
    elif kind == "term-after-step" and (len(nums) == 1 or rank == nums[1]):
        ddp.step_if_finite = counting(ddp.step_if_finite, nums[0], lambda _: die(signal.SIGTERM))
    elif kind == "term-in-save":
        resume.save_merged = counting(resume.save_merged, nums[0], lambda _: die(signal.SIGTERM))
    elif kind == "term-in-generate":
        import sample
        sample.generate = counting_before(sample.generate, nums[0], lambda: die(signal.SIGTERM))
    elif kind == "int-launcher-after-step" and rank == 0:
        def ctrl_c(_):
            import time
            os.kill(os.getppid(), signal.SIGINT)
            # on until the launcher has passed it on: ops/stop.Stopper, the SIGINT handler, has noted it. Then the
            # step's end (the collective stop decision) is certain to see it, on every rank
            stopper, deadline = signal.getsignal(signal.SIGINT).__self__, time.time() + 120
            while stopper.signal is None and time.time() < deadline:
                time.sleep(0.01)
        ddp.step_if_finite = counting(ddp.step_if_finite, nums[0], ctrl_c)
    elif kind == "slow-save":
        import time
        save_merged = resume.save_merged

        def slow(*a, **kw):
            out = save_merged(*a, **kw)
            time.sleep(nums[0])
            return out
        resume.save_merged = slow
    elif kind == "disk-full-in-save":
        import errno

        def full(_):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "trainer_state.pt")
        resume.save_merged = counting(resume.save_merged, nums[0], full)
    elif kind == "disk-free":
        import shutil
        usage = shutil.disk_usage
        shutil.disk_usage = lambda path: usage(path)._replace(free=nums[0])
    elif kind not in ("none", "rank-kill", "rank-stop", "term-after-step", "int-launcher-after-step"):
        raise SystemExit(f"unknown fault {fault!r}")


def main():
    fault, script, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    for one in fault.split("+"):
        inject(one, int(os.environ.get("RANK", 0)))
    sys.argv = [script, *argv]
    runpy.run_path(os.path.join(REPO, script), run_name="__main__")


if __name__ == "__main__":
    main()
