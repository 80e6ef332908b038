"""
The sandbox's runner: the script that runs inside the sandbox, as `python -I -B -c <this file's source>
<result fd>` (sandbox/run.py reads it and starts it; it is never imported). It reads its job as JSON on
stdin (the program, the test snippets, the limits, a nonce, and with strict asserts sandbox/strict_asserts.py
compiled and the program and tests as sandbox/strict_rewrite.py rewrote them),
sets the limits, runs the program once, then each test in the program's namespace under its own timer.

It must not trust the program, which runs in its process: everything the runner uses after the program
has started is bound first, as locals of _main (not module globals: the program could reach those as
__main__), so a program that patches builtins or modules (exec, json.dumps, os.write) changes nothing it
does. With strict asserts, sandbox/strict_asserts.py is executed here before the program, and the covered
asserts' verdicts come from its check(). The verdicts go out once, at the end, on the result fd after
the nonce: per test "c" or "u" (covered or not), then "P" (passed) or "F" + why it failed, hex-encoded
(no json: it could have been patched). Standard library only.
"""
import os, resource, signal, sys, types

def _main():
    _exec, _compile, _type, _str, _len, _range = exec, compile, type, str, len, range
    _BaseException, _StopIteration, _AssertionError = BaseException, StopIteration, AssertionError
    _setitimer, _REAL, _write, _exit = signal.setitimer, signal.ITIMER_REAL, os.write, os._exit
    _hex, _encode, _join, _Function, _Generator = bytes.hex, str.encode, str.join, types.FunctionType, types.GeneratorType

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

    def drive(code):
        # a rewritten test: its generator yields each covered assert's operands to check() (strict)
        gen = _Function(code, ns)()
        if _type(gen) is not _Generator:
            return  # no covered assert in it
        while True:
            try:
                item = gen.send(None)
            except _StopIteration:
                return
            bad = check(item)
            if bad is not None:
                raise _AssertionError(bad)

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
    signal.signal(signal.SIGALRM, alarm)
    ns = {"__name__": "__main__"}
    program, tests, limit_s, max_chars = job["program"], job["tests"], job["test_timeout_s"], job["max_why_chars"]
    plans, covered = None, [False] * _len(tests)
    code = None
    if job["strict_code"]:  # the check, executed here before the program runs
        strict = {"__name__": "strict_asserts"}
        _exec(__import__("marshal").loads(bytes.fromhex(job["strict_code"])), strict)
        check = strict["check"]
    if job["strict_plan"]:  # the rewritten program and tests (None: the program does not parse)
        code, functions, plans, covered = __import__("marshal").loads(bytes.fromhex(job["strict_plan"]))
    # the program once (its own timer: a hang at import time is one failure, not a silent kill)
    failed = timed(lambda: _exec(code if code is not None else _compile(program, "<program>", "exec"), ns))
    out = []
    for i in _range(_len(tests)):
        if failed:  # a program that failed to run fails every test (its namespace is incomplete)
            w = "program: " + failed
        elif plans is None or plans[i][0] == "plain":
            w = timed(lambda: _exec(_compile(tests[i], "<test>", "exec"), ns))
        else:
            w = timed(lambda: drive(functions[plans[i][1]] if plans[i][0] == "fn" else plans[i][1]))
        out.append(("c" if covered[i] else "u") + ("P" if w is None else "F" + _hex(_encode(w, "utf-8", "replace"))))
    _write(fd, _encode(job["nonce"] + " " + _join(" ", out) + "\n"))
    _exit(0)  # no atexit handlers or finalizers of the program's objects after the result


if __name__ == "__main__":
    _main()
