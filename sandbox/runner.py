"""
The runner of d1's plain asserts (sandbox/run.py with STRICT_ASSERTS = False): the script that runs inside
the sandbox, as `python -I -B -c <boot> <this file compiled, with confine.py's in front but in plain mode>
<result fd>` (sandbox/run.py compiles and starts it; it is never imported). It reads its job as JSON on stdin (the program, the test
snippets, the limits, a nonce), sets the limits and confine.confine (every mode but plain), runs the program
once, then each test in the program's namespace under its own timer; a test passes if it raises
nothing, as in d1.

The program runs in its process, so the program can reach everything here; the runner only makes the
plain cases robust: everything it uses after the program has started is bound first, as locals of
_main (not module globals: the program could reach those as __main__), so a program that patches
builtins or modules (exec, json.dumps, os.write) changes nothing it does. The verdicts go out once, at
the end, on the result fd after the nonce: per test "P" (passed) or "F" + why it failed,
hex-encoded (no json: it could have been patched). A verdict no program can reach is the two-process
check (sandbox/worker.py), the default. Standard library only.
"""
import os, resource, signal, sys

def _main():
    _exec, _compile, _type, _str, _len, _range = exec, compile, type, str, len, range
    _BaseException = BaseException
    _setitimer, _REAL, _write, _exit = signal.setitimer, signal.ITIMER_REAL, os.write, os._exit
    _hex, _encode, _join = bytes.hex, str.encode, str.join

    def alarm(signum, frame):
        raise TimeoutError("the runner's per-test timer")

    def why_of(e):
        try:
            return (_type(e).__name__ + ": " + _str(e))[:max_chars]
        except _BaseException:  # an exception whose str() raises in turn
            return "unprintable exception"

    def timed(fn):
        # fn() under the per-test timer -> None, or why it failed. The outer try also catches an alarm
        # that fires after fn returned but before the timer is disarmed
        try:
            try:
                _setitimer(_REAL, limit_s)
                fn()
            finally:
                _setitimer(_REAL, 0)
        except _BaseException as e:
            return why_of(e)
        return None

    fd = int(sys.argv[1])
    try:  # a group of its own: kill(0) (what getppid() = 0 turns kill(getppid()) into) hits only itself
        os.setsid()
    except OSError:
        pass  # already a session leader (plain mode: the trainer started it in a new session)
    job = __import__("json").loads(sys.stdin.read())
    sys.stdin.close()
    # the limits, before any untrusted code runs; inherited by everything the program starts. Only
    # lowered, so no privilege is needed, and without raising the hard limit they can't be undone
    os.umask(0o077)
    for name, (soft, hard) in job["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if job.get("confine") is not None:  # sandbox/confine.py's source runs in front of this one
        confine(**job["confine"])  # noqa: F821 (an error ends the runner: no verdict, every test fails)
    signal.signal(signal.SIGALRM, alarm)
    ns = {"__name__": "__main__"}
    program, tests, limit_s, max_chars = job["program"], job["tests"], job["test_timeout_s"], job["max_why_chars"]
    # the program once (its own timer: a hang at import time is one failure, not a silent kill)
    failed = timed(lambda: _exec(_compile(program, "<program>", "exec"), ns))
    out = []
    for i in _range(_len(tests)):
        # a program that failed to run fails every test (its namespace is incomplete)
        w = "program: " + failed if failed else timed(lambda: _exec(_compile(tests[i], "<test>", "exec"), ns))
        out.append("P" if w is None else "F" + _hex(_encode(w, "utf-8", "replace")))
    _write(fd, _encode(job["nonce"] + " " + _join(" ", out) + "\n"))
    _exit(0)  # no atexit handlers or finalizers of the program's objects after the result


if __name__ == "__main__":
    _main()
