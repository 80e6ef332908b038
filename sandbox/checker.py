"""
The checker (docs/code-task.md, "A reward that cannot be gamed"): runs the tests as written, in a
process that never executes program code. Every name the program defines is bound to a proxy; calling it
sends the arguments to the program server (sandbox/server.py) and gets back builtin values, rebuilt here
by sandbox/wire.py, so every comparison, set(), sorted() and bool() of a test runs on the checker's own
objects. A proxy has no remote __eq__, __hash__ or __bool__: an object the program keeps passes no
comparison and no truth test.

check_job() is one program's tests on an open connection to its server: the trusted prefix (HumanEval's
prompt, MBPP's imports, LeetCode's helpers) runs here first, in globals of its own (its helpers never see
a program name), and the test's namespace starts as a copy of it. The test's namespace is the test's: of
the program's names, only those the item declares are bound (test_targets: the item's targets, the
prefix's stubs, and the names the tests use but define nowhere), never over a builtin, a module or a name
the prefix or the tests define (a declared target may shadow a builtin: MBPP 126's `sum`); a module the
program imported is the checker's own, from a list imported at start, and only under its own name.
KodCode's test source runs after that, so its test functions are the checker's. sandbox/worker.py runs it
in a process of its own (worker.run_checked: one program, its server and a pooled checker).
"""
import ast
import builtins
import importlib
import signal
import socket
import sys
import threading

from sandbox import server, wire

# exceptions a program may not raise into the test: they would steer its control flow
STEERING = {"StopIteration", "StopAsyncIteration", "GeneratorExit", "SystemExit", "KeyboardInterrupt"}
# the modules a test may take from the program's imports (MBPP+ 120's tests use `math` only the program
# imports): imported once when the checker starts (import_test_modules), never on a reply, and bound only under
# their own name. Anything else the tests need they import themselves
TEST_MODULES = ("math", "cmath", "re", "string", "collections", "itertools", "functools", "operator", "heapq",
                "bisect", "statistics", "fractions", "decimal", "random", "datetime", "copy", "json", "typing",
                "sys")  # MBPP+ 596: sys.getsizeof
MAX_WHY_CHARS = 80


def import_test_modules():
    """TEST_MODULES, imported before any job (worker.main); -> {name: module}."""
    return {name: importlib.import_module(name) for name in TEST_MODULES}


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
    """Mutable arguments take the state the call left them in (the server sent them back). Only after a
    call that returned None, the in-place form (`rotate(matrix)`, `lst.sort()`): a call whose result the
    test compares leaves its arguments as they were, so a program cannot empty the test's `expected`
    it was handed (`assert f(xs) == xs`)."""
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
        self.number = 0  # every frame carries the number of the request it belongs to (docs/code-task.md)
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

    def _receive(self, number):
        """The next frame, which must belong to request `number`: a reply to another request, or a second
        reply to one already answered, is a server out of step (a forked one, a patched one)."""
        data = server.recv_frame(self.sock)
        if data is None:
            raise RemoteError("the program server is gone")
        frame = wire.decode(data, make_handle=self.handle, trusted=self.trusted)
        if not (type(frame) is tuple and len(frame) == 2 and frame[0] == number):
            raise RemoteError("a reply to another request")
        return frame[1]

    def unasked(self):
        """Whether a frame nobody asked for is waiting on the socket (checked after the last test)."""
        timeout = self.sock.gettimeout()
        self.sock.settimeout(0)  # with a timeout set, recv would first wait for data that never comes
        try:
            return bool(self.sock.recv(1, socket.MSG_PEEK))
        except OSError:  # BlockingIOError: nothing there
            return False
        finally:
            self.sock.settimeout(timeout)

    def request(self, msg, args=(), stop=False):
        if self.dead:
            raise RemoteError(f"the connection is dead: {self.dead}")
        self.number += 1
        number = self.number
        try:
            server.send_frame(self.sock, self._encode((number, msg)))
            reply = self._receive(number)
            while type(reply) is tuple and len(reply) == 4 and reply[0] == "callback":
                answer = self._run_callback(*reply[1:])
                server.send_frame(self.sock, self._encode((number, answer)))
                reply = self._receive(number)
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
        if type(reply[2]) is list and reply[1] is None:
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


def names_in(source):
    """(names the code reads, names it binds anywhere: assignments, defs, classes, imports, parameters,
    loop and comprehension targets), or two empty sets when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set(), set()
    read, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return read, bound


def test_targets(tests, test_source="", prefix="", targets=()):
    """(the program names the test may see, the module names it may take from the program's imports):
    the item's declared `targets` and the prefix's stubs, which may shadow a builtin (MBPP 126 asks for
    `sum`), and the names the tests read but nothing of theirs defines, which may not: a program that
    defines `set`, `abs` or a class `math` rewrites no test. A name the prefix or the tests define is
    never the program's (the prefix's stubs excepted), nor one a `global` line of the test source
    names: code_prep puts there what the setup lines d1's split dropped bound (`data = [...]`), which
    stay the test's. d1's `assert abs(` target is no declared target (code_prep leaves it out)."""
    read, bound = set(), set()
    for code in (test_source, *tests):
        r, b = names_in(code)
        read |= r
        bound |= b
    free = read - bound - set(names_in(prefix)[1])
    modules = {n for n in free if n in TEST_MODULES}
    named = {n for n in free if not hasattr(builtins, n) and n not in sys.stdlib_module_names}
    declared = {n for n in (*targets, *stubs(prefix)) if n in read - bound}  # only what the tests use
    return {n for n in named | declared if type(n) is str and not n.startswith("__")}, modules


def check_job(conn, program, tests, prefix="", test_source="", test_timeout_s=None, targets=(), modules=None):
    """[None (passed) or why it failed] per test snippet: `program` runs in conn's server; `prefix` and
    `test_source` (trusted) and each snippet run here, with the program's declared names bound as
    proxies (test_targets). `modules`: import_test_modules()'s, imported by the caller before any job."""
    # the prefix in globals of its own: its helpers (HumanEval/32's poly, /38's encode_cyclic) call the
    # builtins, never a program name. __main__, as the tests see it in d1's one program (KodCode's `if
    # __name__ == "__main__": pytest.main([__file__])` runs there and fails, no __file__ being defined:
    # every test fails, in either verdict, as in d1)
    trusted_ns = {"__name__": "__main__"}
    failed = _timed(lambda: exec(compile(prefix, "<prefix>", "exec"), trusted_ns), test_timeout_s)
    if failed:
        return ["prefix: " + failed] * len(tests)
    base = dict(trusted_ns)
    conn.trusted = {k: v for k, v in base.items() if isinstance(v, type) and v.__module__ == "__main__"}
    replaceable = stubs(prefix)
    bindable, module_names = test_targets(tests, test_source, prefix, targets)
    try:
        names, imported = conn.request(("exec", program, sorted(conn.trusted)))
    except BaseException as e:  # noqa: BLE001 (the program failed to run: every test fails)
        return ["program: " + _why(e)] * len(tests)
    for k in bindable:
        if k in names and (k not in base or k in replaceable):
            base[k] = names[k]
    loaded = modules if modules is not None else {}
    for k in module_names:  # `import math` in the program, `math.isclose` in the test: the checker's math
        if k not in base and imported.get(k) == k and k in loaded:
            base[k] = loaded[k]
    if test_source:
        failed = _timed(lambda: exec(compile(test_source, "<tests>", "exec"), base), test_timeout_s)
        if failed:
            return ["tests: " + failed] * len(tests)
    # one namespace for all snippets, as d1's runner has (MBPP+'s `import math` is a test of its own)
    why = [_timed(lambda: exec(compile(test, "<test>", "exec"), base), test_timeout_s) for test in tests]
    if conn.unasked():  # a reply after the last one asked for: the server is not the one we talk to
        return ["a reply nobody asked for"] * len(tests)
    return why
