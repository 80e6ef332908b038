"""
The program server (docs/code-task.md, "A reward that cannot be gamed"): the one process that runs the
program. It execs the program once, then answers the checker's requests over one socket, in frames of
sandbox/wire.py's encoding, until EOF. It never receives a test, a test's code or an expected value:
only the arguments of the calls the test makes. Nothing it sends is trusted by the checker beyond "some
builtin value": the program may patch or replace all of this, and gain nothing.

Started by sandbox/worker.py's start_server inside sandbox/contain.py's containment, as `python -I -B -c
<read the code from stdin> <socket fd> <per-call timer> <limits>`: its code (wire.py's, confine.py's and
this file's) arrives compiled on stdin, and it sets the limits itself before the program runs (resource
limits and confine.confine: the keyring and the seccomp allow-list, in "landlock" mode Landlock and the uid
drop too). Every frame is (number, message): a request's number, echoed by its reply and by the callbacks made while it runs (the
checker refuses a frame of another number). Requests and replies (a reply to a request that runs program
code ends with what it printed, for a test that captures sys.stdout):
    ("exec", program, trusted)     -> ("names", {name: value or handle}, {name: stdlib module name})
                                      trusted: the class names whose instances travel as records
    ("call", h, args, kwargs)      -> ("ok", result, args after the call, printed)
                                      | ("raise", [MRO names], message, printed)
    ("getattr", h, name)           -> the same
    ("setattr", h, name, value)    -> the same
    ("op", h, name, args)          -> the same, for len, iter, next, getitem, setitem, contains, str
A callable of the test's among the arguments (K on the wire) becomes a function here that sends
("callback", k, args, kwargs) and serves the checker's requests until its ("ok", value) or ("raise",
[MRO names], message) comes back. Standard library only.
"""
import _signal as signal  # signal.py's enums cost a server start ~3 ms; the functions are _signal's
import builtins
import io
import os
import sys

if "encode" not in globals():  # imported (tests), not started with wire.py's source in front
    from sandbox.confine import confine
    from sandbox.wire import decode, encode

MAX_FRAME = 16 << 20
MAX_PRINTED = 1 << 20  # bytes of a call's printed output sent back with its reply
MAX_MESSAGE_CHARS = 200  # an exception's message as it travels, either way (the checker cuts its own the same)
OPS = {"len": len, "iter": iter, "next": next, "getitem": lambda o, k: o[k], "contains": lambda o, k: k in o,
       "setitem": lambda o, k, v: o.__setitem__(k, v), "str": str}


def recv_frame(sock):
    """One frame's bytes, or None at EOF."""
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    n = int.from_bytes(head, "big")
    if n > MAX_FRAME:
        raise ValueError("frame too large")
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(min(n - len(data), 1 << 20))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def send_frame(sock, data):
    sock.sendall(len(data).to_bytes(4, "big") + data)


class Printed(io.RawIOBase):
    """sys.stdout during a call: a text stream with a binary buffer under it (sys.stdout.buffer.write works)
    that keeps the first MAX_PRINTED bytes and drops the rest (4 GiB printed cost nothing)."""

    def __init__(self):
        self.data = bytearray()
        self.text = io.TextIOWrapper(io.BufferedWriter(self), encoding="utf-8", errors="surrogateescape",
                                     write_through=True)

    def writable(self):
        return True

    def write(self, b):
        room = MAX_PRINTED - len(self.data)
        if room > 0:
            self.data += bytes(b[:room])
        return len(b)

    def value(self):
        try:
            self.text.flush()
        except BaseException:  # the program closed or broke it: what came through is the answer
            pass
        return self.data.decode("utf-8", "replace")


class FdSocket:
    """recv / sendall on a bare descriptor: the server's end of its socketpair without the socket module
    (importing it is ~20 ms of every server start)."""

    def __init__(self, fd):
        self.fd = fd

    def recv(self, n):
        return os.read(self.fd, n)

    def sendall(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]


def kind_of(obj):
    if isinstance(obj, type):
        return "exception" if issubclass(obj, BaseException) else "class"
    return "function" if callable(obj) else "instance"


def _modules(ns):
    """{name: module name} for the program's top-level names bound to standard-library modules: the
    checker imports its own copy (a test may use `math` that only the program imported)."""
    mod_type, names = type(sys), getattr(sys, "stdlib_module_names", ())
    out = {}
    for k, v in ns.items():
        if type(v) is mod_type and type(getattr(v, "__name__", None)) is str and v.__name__.split(".")[0] in names:
            out[k] = v.__name__
    return out


class _ByHandle:
    """A top-level value sent as a handle (serve's handle_of unwraps it)."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


NAMES_BUDGET = 4 << 20  # bytes of top-level values sent with "names" as values; the rest go as handles


def _values_or_handles(names, trusted):
    """The program's top-level names with every value whose encoding would not fit the budget left (or
    does not encode at all) wrapped as a handle: a 64 MiB table must not push the "names" reply past
    MAX_FRAME and fail every test (only a comparison with that value itself fails: a handle compares with
    nothing). Measured by encoding with dummy handles."""
    left, out = NAMES_BUDGET, {}
    for k, v in names.items():
        try:
            n = len(encode(v, trusted=trusted, handle_of=lambda obj: (0, "instance:object")))
        except BaseException:
            n = None
        if n is None or n > left:
            out[k] = _ByHandle(v)
        else:
            out[k] = v
            left -= n
    return out


def serve(fd, test_timeout_s=3.0, limits=None):
    """Serve the checker on fd until EOF. `limits`: {"rlimits": {name: (soft, hard)}, "confine": None or
    confine()'s keyword arguments}, all applied before any program code runs and never undone."""
    try:  # a group of its own: kill(0) (what getppid() = 0 in a pid namespace makes of kill(getppid())) hits only it
        os.setsid()
    except OSError:
        pass  # already a session leader (plain and landlock modes)
    limits = limits or {}
    if limits.get("rlimits"):
        import resource
        for name, (soft, hard) in limits["rlimits"].items():
            resource.setrlimit(getattr(resource, name), (soft, hard))
    if limits.get("confine") is not None:  # no namespaces here: contained in place (an error ends the server)
        confine(**limits["confine"])
    sock = FdSocket(fd)
    table, trusted, current = [], {}, [0]  # current: the numbers of the requests being served, innermost last

    def handle_of(obj):
        if type(obj) is _ByHandle:  # a program value too large to send as a value
            obj = obj.value
        table.append(obj)
        return len(table) - 1, kind_of(obj) + ":" + ",".join(c.__name__ for c in type.__getattribute__(
            obj if isinstance(obj, type) else type(obj), "__mro__"))

    def send(msg):
        try:
            payload = encode((current[-1], msg), handle_of=handle_of, trusted=tuple(trusted.values()))
        except BaseException as e:  # a value the wire cannot carry and no handle for it
            payload = encode((current[-1], ("raise", ["TypeError"],
                                            f"the reply does not encode: {e}"[:MAX_MESSAGE_CHARS], "")))
        send_frame(sock, payload)

    def receive():
        """The next frame's (number, message)."""
        data = recv_frame(sock)
        if data is None:  # the checker is done with us
            os._exit(0)
        return decode(data, make_handle=lambda k, kind: table[k], make_callback=callback, trusted=trusted)

    def serve_one(number, msg):
        current.append(number)
        try:
            send(handle(msg))
        finally:
            current.pop()

    def callback(k):
        """A callable of the test's (a key function, a lambda): calling it asks the checker to run it."""
        def call(*args, **kwargs):
            send(("callback", k, list(args), kwargs))
            while True:  # the checker's answer; the requests its callable makes meanwhile are served
                number, msg = receive()
                if msg[0] == "ok":
                    return msg[1]
                if msg[0] == "raise":
                    cls = next((c for c in (getattr(builtins, n, None) for n in msg[1]) if isinstance(c, type)
                                and issubclass(c, Exception)), Exception)
                    raise cls(msg[2])
                serve_one(number, msg)
        return call

    def alarm(signum, frame):
        raise TimeoutError("the server's per-call timer")

    def reply(fn):
        # fn() under the per-call timer, what it prints captured. Both saved and restored: a callback can
        # nest a call inside this one
        printed, old_out = Printed(), sys.stdout
        try:
            old_timer = signal.setitimer(signal.ITIMER_REAL, test_timeout_s)
            try:
                sys.stdout = printed.text
                return ("ok",) + fn() + (printed.value(),)
            finally:
                sys.stdout = old_out
                signal.setitimer(signal.ITIMER_REAL, *old_timer)
        except BaseException as e:
            return ("raise", [c.__name__ for c in type(e).__mro__], str(e)[:MAX_MESSAGE_CHARS], printed.value())

    def setattr_(obj, name, value):
        setattr(obj, name, value)
        return None, ()

    def handle(req):
        if req[0] == "call":
            return reply(lambda: (req[1](*req[2], **req[3]), req[2]))
        if req[0] == "getattr":
            return reply(lambda: (getattr(req[1], req[2]), ()))
        if req[0] == "setattr":
            return reply(lambda: setattr_(req[1], req[2], req[3]))
        if req[0] == "op":
            return reply(lambda: (OPS[req[2]](req[1], *req[3]), req[3]))
        if req[0] == "exec":
            out = reply(lambda: (exec(compile(req[1], "<program>", "exec"), ns), None))
            if out[0] != "ok":
                return out
            trusted.update((n, ns[n]) for n in req[2] if isinstance(ns.get(n), type))
            mods = _modules(ns)
            names = {k: v for k, v in ns.items() if not k.startswith("__") and k not in mods}
            return ("names", _values_or_handles(names, tuple(trusted.values())), mods)
        return ("raise", ["ValueError"], f"unknown request {req[0]!r}", "")

    signal.signal(signal.SIGALRM, alarm)
    ns = {"__name__": "__main__"}
    while True:
        serve_one(*receive())


if __name__ == "__main__":  # argv: the socket's fd, the per-call timer, marshal.dumps(limits).hex()
    import marshal
    serve(int(sys.argv[1]), float(sys.argv[2]), marshal.loads(bytes.fromhex(sys.argv[3])))
