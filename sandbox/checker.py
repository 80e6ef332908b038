"""
The checker (issue 36, WIP; docs/issue36-design.md): runs the tests as written, in a process that
never executes program code. Every name the program defines is bound to a proxy; calling it sends the
arguments to the program server (sandbox/server.py) and gets back builtin values, rebuilt here by
sandbox/wire.py, so every comparison, set(), sorted() and bool() of a test runs on the checker's own
objects. A proxy has no remote __eq__, __hash__ or __bool__: an object the program keeps passes no
comparison and no truth test.

Prototype: launch() starts the server as a plain subprocess (no namespaces yet), and run_tests runs
in the caller's process (the trainer's, in tests). What remains: its own process, the namespaces and
the whitelist root, trusted classes, callbacks, print output, d1's KodCode split.

    from sandbox.checker import run_program
    run_program("def add(a, b):\\n    return a + b", ["assert add(1, 2) == 3"])   # [True]
"""
import builtins
import os
import socket
import subprocess
import sys

from sandbox import server, wire

_HERE = os.path.dirname(os.path.abspath(__file__))
# exceptions a program may not raise into the test: they would steer its control flow
STEERING = {"StopIteration", "StopAsyncIteration", "GeneratorExit", "SystemExit", "KeyboardInterrupt"}


class RemoteError(Exception):
    """An exception the program raised that the checker does not re-raise as itself."""


class Remote:
    """An object that lives in the program server. Identity is its only equality."""
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

    def __bool__(self):
        raise TypeError("the truth of an object the program keeps is not a value")

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


class Connection:
    def __init__(self, sock, timeout_s=5.0):
        self.sock, self.handles, self.exceptions = sock, {}, {}
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

    def request(self, msg, args=(), stop=False):
        server.send_frame(self.sock, wire.encode(msg, handle_of=lambda r: self._own(r)))
        data = server.recv_frame(self.sock)
        if data is None:
            raise RemoteError("the program server is gone")
        reply = wire.decode(data, make_handle=self.handle)
        if type(reply) is not tuple or not reply or reply[0] not in ("ok", "raise", "names"):
            raise RemoteError("a malformed reply")
        if reply[0] == "names":
            return reply[1]
        if reply[0] == "raise":
            mro, message = reply[1], reply[2]
            if stop and mro[:1] == ["StopIteration"]:
                raise StopIteration
            raise self.exception_class(mro)(message)
        write_back(args, reply[2])
        return reply[1]

    def _own(self, obj):
        """Handles go back as themselves; anything else of the checker's is not sent."""
        if type(obj) is Remote and obj._conn is self:
            return obj._id, obj._kind
        raise TypeError(f"the test passed a {type(obj).__name__}, which does not travel")


def launch():
    """(server process, connection): the program server, started with wire.py's source in front."""
    with open(os.path.join(_HERE, "wire.py")) as f, open(os.path.join(_HERE, "server.py")) as g:
        source = f.read() + "\n" + g.read()
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen([sys.executable, "-I", "-B", "-c", source, str(theirs.fileno())],
                            pass_fds=(theirs.fileno(),), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    theirs.close()
    return proc, Connection(ours)


def run_program(program, tests, prefix=""):
    """[passed] per test snippet: the program in its server, the tests here, as written."""
    proc, conn = launch()
    try:
        try:
            names = conn.request(("exec", program))
        except Exception:
            return [False] * len(tests)
        out = []
        for test in tests:
            ns = {"__name__": "__test__"}
            exec(compile(prefix, "<prefix>", "exec"), ns)  # trusted: the benchmark's own code
            ns.update(names)
            try:
                exec(compile(test, "<test>", "exec"), ns)
                out.append(True)
            except BaseException:  # noqa: BLE001 (a failed test, whatever it raised)
                out.append(False)
        return out
    finally:
        conn.sock.close()
        proc.kill()
        proc.wait()
