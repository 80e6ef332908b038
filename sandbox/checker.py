"""
The checker (docs/code-task.md, "A reward that cannot be gamed"): runs the tests as written, in a
process that never executes program code. Every name the program defines is bound to a proxy; calling it
sends the arguments to the program server (sandbox/server.py) and gets back builtin values, rebuilt here
by sandbox/wire.py, so every comparison, set(), sorted() and bool() of a test runs on the checker's own
objects. A proxy has no remote __eq__, __hash__ or __bool__: an object the program keeps passes no
comparison and no truth test.

check_job() is one program's tests on an open connection to its server: the trusted prefix (HumanEval's
prompt, MBPP's imports, LeetCode's helpers) runs here first and keeps its own names, except the stubs
the program is asked to complete (a function whose body is only a docstring); the program's other names
become proxies (its standard-library modules: the checker's own import); KodCode's test source runs
after that, so its test functions are the checker's. sandbox/worker.py runs it in a process of its own
(worker.run_checked: one program, its server and a pooled checker).
"""
import ast
import builtins
import importlib
import signal
import sys
import threading

from sandbox import server, wire

# exceptions a program may not raise into the test: they would steer its control flow
STEERING = {"StopIteration", "StopAsyncIteration", "GeneratorExit", "SystemExit", "KeyboardInterrupt"}
NO_IMPORT = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo"}  # side effects on import
MAX_WHY_CHARS = 80


class RemoteError(Exception):
    """An exception the program raised that the checker does not re-raise as itself, or no reply."""


class CheckerTimeout(TimeoutError):
    """The checker's per-test timer."""


class Remote:
    """An object that lives in the program server. It compares with nothing (== and != raise) and has no
    truth value: only what the program sends as a value can pass an assert."""
    __slots__ = ("_conn", "_id", "_kind", "__weakref__")

    def __init__(self, conn, k, kind):
        object.__setattr__(self, "_conn", conn)
        object.__setattr__(self, "_id", k)
        object.__setattr__(self, "_kind", kind)

    def __call__(self, *args, **kwargs):
        return self._conn.request(("call", self, list(args), kwargs), args=list(args))

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._conn.request(("getattr", self, name))

    def __len__(self):
        return self._conn.request(("op", self, "len", []))

    def __iter__(self):
        return self._conn.request(("op", self, "iter", []))

    def __next__(self):
        return self._conn.request(("op", self, "next", []), stop=True)

    def __getitem__(self, key):
        return self._conn.request(("op", self, "getitem", [key]))

    def __contains__(self, item):
        return self._conn.request(("op", self, "contains", [item]))

    def __setattr__(self, name, value):
        self._conn.request(("setattr", self, name, value))

    def __setitem__(self, key, value):
        self._conn.request(("op", self, "setitem", [key, value]))

    def __str__(self):
        return self._conn.request(("op", self, "str", []))

    def __bool__(self):
        raise TypeError("the truth of an object the program keeps is not a value")

    def __eq__(self, other):  # not identity either: `handle != 5` would pass any != assert
        raise TypeError("an object the program keeps is not a value to compare")

    __ne__ = __eq__
    __hash__ = object.__hash__

    def __repr__(self):
        return f"<remote {self._kind.split(':')[0]} #{self._id}>"


def write_back(sent, new):
    """Mutable arguments take the state the call left them in (the server sent them back)."""
    for a, b in zip(sent, new):
        if type(a) is list and type(b) is list:
            a[:] = b
        elif type(a) is dict and type(b) is dict:
            a.clear()
            a.update(b)
        elif type(a) is set and type(b) is set:
            a.clear()
            a.update(b)
        elif type(a) is type(b) and type(a) is not Remote and hasattr(a, "__dict__") and a is not b:
            vars(a).clear()  # a trusted object (decoded as the checker's own class), in place
            vars(a).update(vars(b))


class Connection:
    """The checker's end of one program server's socket. A reply that does not come in time, or a frame
    cut by a timer, leaves the stream out of step: the connection is then dead and every later request
    fails (the server's own per-call timer answers a slow call cleanly, before this one fires)."""

    def __init__(self, sock, timeout_s=5.0):
        self.sock, self.handles, self.exceptions, self.dead = sock, {}, {}, None
        self.trusted = {}  # class name -> the checker's own class, whose instances travel as records
        self.callbacks = []  # the test's callables passed to the program (K on the wire), by id
        sock.settimeout(timeout_s)

    def handle(self, k, kind):
        if k not in self.handles:
            if kind.startswith("exception:"):  # a class the test may name in pytest.raises
                self.handles[k] = self.exception_class(kind.split(":")[1].split(","))
            else:
                self.handles[k] = Remote(self, k, kind)
        return self.handles[k]

    def exception_class(self, mro):
        """The nearest builtin exception of an MRO given by names, or a class of the program's name over it."""
        base = next((getattr(builtins, n) for n in mro if isinstance(getattr(builtins, n, None), type)
                     and issubclass(getattr(builtins, n), BaseException)), Exception)
        if mro[0] in STEERING or base.__name__ in STEERING:
            return RemoteError
        if base.__name__ == mro[0]:
            return base
        key = tuple(mro)
        if key not in self.exceptions:
            self.exceptions[key] = type(mro[0], (base,), {"__module__": "solution"})
        return self.exceptions[key]

    def _encode(self, msg):
        return wire.encode(msg, handle_of=self._own, callback_of=self._callback, trusted=tuple(self.trusted.values()))

    def _receive(self):
        data = server.recv_frame(self.sock)
        if data is None:
            raise RemoteError("the program server is gone")
        return wire.decode(data, make_handle=self.handle, trusted=self.trusted)

    def request(self, msg, args=(), stop=False):
        if self.dead:
            raise RemoteError(f"the connection is dead: {self.dead}")
        try:
            server.send_frame(self.sock, self._encode(msg))
            reply = self._receive()
            while type(reply) is tuple and len(reply) == 4 and reply[0] == "callback":
                server.send_frame(self.sock, self._encode(self._run_callback(*reply[1:])))
                reply = self._receive()
        except BaseException as e:  # a timeout, EOF, a garbled frame, a timer mid-frame: out of step
            self.dead = type(e).__name__
            raise RemoteError(f"no reply: {type(e).__name__}") from None
        if type(reply) is not tuple or not reply or reply[0] not in ("ok", "raise", "names"):
            raise RemoteError("a malformed reply")
        if reply[0] == "names":
            if len(reply) != 3 or type(reply[1]) is not dict or type(reply[2]) is not dict:
                raise RemoteError("a malformed reply")
            return reply[1], reply[2]
        if len(reply) != 4 or type(reply[3]) is not str or (reply[0] == "raise" and not (
                type(reply[1]) is list and reply[1] and all(type(n) is str for n in reply[1]))):
            raise RemoteError("a malformed reply")
        if reply[3]:  # what the call printed, to the test's sys.stdout (which it may have redirected)
            sys.stdout.write(reply[3])
        if reply[0] == "raise":
            mro, message = reply[1], reply[2]
            if stop and mro[:1] == ["StopIteration"]:
                raise StopIteration
            raise self.exception_class(mro)(str(message))
        if type(reply[2]) is list:
            write_back(args, reply[2])
        return reply[1]

    def _run_callback(self, k, args, kwargs):
        """The program called one of the test's callables: run it here, on the values it sent -> the answer.
        The test's own timer ending it (CheckerTimeout) is not the program's to catch: it propagates."""
        if not (type(k) is int and 0 <= k < len(self.callbacks) and type(args) is list and type(kwargs) is dict
                and all(type(n) is str for n in kwargs)):
            return ("raise", ["TypeError"], "a malformed callback")
        try:
            return ("ok", self.callbacks[k](*args, **kwargs))
        except CheckerTimeout:
            raise
        except Exception as e:  # noqa: BLE001 (the callable's own failure, the program's to handle)
            try:
                message = str(e)[:server.MAX_MESSAGE_CHARS]
            except Exception:  # noqa: BLE001 (an exception whose str() raises)
                message = ""
            return ("raise", [c.__name__ for c in type(e).__mro__], message)

    def _callback(self, obj):
        """A callable of the test's goes to the program as a callback id; the program's own go as handles."""
        if type(obj) is Remote:
            return None
        self.callbacks.append(obj)
        return len(self.callbacks) - 1

    def _own(self, obj):
        """Handles go back as themselves; anything else of the checker's is not sent."""
        if type(obj) is Remote and obj._conn is self:
            return obj._id, obj._kind
        raise TypeError(f"the test passed a {type(obj).__name__}, which does not travel")



def stubs(prefix):
    """The functions the trusted prefix only declares (a body of docstrings, `pass`, `...` and imports:
    HumanEval/115's `import math`): the names the program is asked to define (HumanEval's entry point),
    the only prefix names it may replace."""
    try:
        tree = ast.parse(prefix)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    empty = lambda n: isinstance(n, (ast.Pass, ast.Import, ast.ImportFrom)) or (
        isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and all(empty(b) for b in n.body)}


def _why(e):
    try:
        return (type(e).__name__ + ": " + str(e))[:MAX_WHY_CHARS] or "failed"
    except BaseException:  # noqa: BLE001 (an exception whose str() raises)
        return type(e).__name__


def _timed(fn, limit_s):
    """fn() under a per-test timer (the main thread only) -> None, or why it failed."""
    timer = limit_s and threading.current_thread() is threading.main_thread()

    def alarm(signum, frame):
        raise CheckerTimeout("the checker's per-test timer")
    try:
        if timer:
            old = signal.signal(signal.SIGALRM, alarm)
            signal.setitimer(signal.ITIMER_REAL, limit_s)
        try:
            fn()
        finally:
            if timer:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
    except BaseException as e:  # noqa: BLE001 (a failed test, whatever it raised)
        return _why(e)
    return None


def check_job(conn, program, tests, prefix="", test_source="", test_timeout_s=None):
    """[None (passed) or why it failed] per test snippet: `program` runs in conn's server; `prefix` and
    `test_source` (trusted) and each snippet run here, with the program's names bound as proxies."""
    # __main__, as the tests see it in d1's one program (KodCode's `if __name__ == "__main__": pytest.main(
    # [__file__])` runs there and fails: every test fails, in either verdict)
    base = {"__name__": "__main__"}
    failed = _timed(lambda: exec(compile(prefix, "<prefix>", "exec"), base), test_timeout_s)
    if failed:
        return ["prefix: " + failed] * len(tests)
    conn.trusted = {k: v for k, v in base.items() if isinstance(v, type) and v.__module__ == "__main__"}
    replaceable = stubs(prefix)
    try:
        names, modules = conn.request(("exec", program, sorted(conn.trusted)))
    except BaseException as e:  # noqa: BLE001 (the program failed to run: every test fails)
        return ["program: " + _why(e)] * len(tests)
    for k, v in names.items():
        if type(k) is str and (k not in base or k in replaceable):
            base[k] = v
    for k, v in modules.items():
        top = v.split(".")[0] if type(v) is str else ""
        if type(k) is str and k not in base and top in sys.stdlib_module_names and top not in NO_IMPORT:
            try:
                base[k] = importlib.import_module(v)
            except ImportError:
                pass
    if test_source:
        failed = _timed(lambda: exec(compile(test_source, "<tests>", "exec"), base), test_timeout_s)
        if failed:
            return ["tests: " + failed] * len(tests)
    # one namespace for all snippets, as d1's runner has (MBPP+'s `import math` is a test of its own)
    return [_timed(lambda: exec(compile(test, "<test>", "exec"), base), test_timeout_s) for test in tests]

