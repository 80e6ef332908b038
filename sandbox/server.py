"""
The program server (issue 36; docs/issue36-design.md): the one process that runs the program. It execs
the program once, then answers the checker's requests over one socket, in frames of sandbox/wire.py's
encoding, until EOF. It never receives a test, a test's code or an expected value: only the arguments
of the calls the test makes. Nothing it sends is trusted by the checker beyond "some builtin value":
the program may patch or replace all of this, and gain nothing.

Started by sandbox/worker.py's start_server inside sandbox/contain.py's containment, as `python -I -B -c
<read the code from stdin> <socket fd> <per-call timer> <resource limits>`: its code (wire.py's + this
file's) arrives compiled on stdin, and it sets the limits itself before the program runs. Requests and replies:
    ("exec", program, trusted)     -> ("names", {name: value or handle}, {name: stdlib module name})
                                      trusted: the class names whose instances travel as records
    ("call", h, args, kwargs)      -> ("ok", result, args after the call) | ("raise", [MRO names], message)
    ("getattr", h, name)           -> the same
    ("setattr", h, name, value)    -> the same
    ("op", h, name, args)          -> the same, for len, iter, next, getitem, setitem, contains, str
Standard library only.
"""
import _signal as signal  # signal.py's enums cost a server start ~3 ms; the functions are _signal's
import os
import sys

if "encode" not in globals():  # imported (tests), not started with wire.py's source in front
    from sandbox.wire import decode, encode

MAX_FRAME = 16 << 20
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


def serve(fd, test_timeout_s=3.0, rlimits=None):
    try:  # a group of its own: kill(0) (what getppid() = 0 in a pid namespace makes of kill(getppid())) hits only it
        os.setsid()
    except OSError:
        pass  # already a session leader (plain mode)
    if rlimits:  # lowered before any program code runs, never raised again
        import resource
        for name, (soft, hard) in rlimits.items():
            resource.setrlimit(getattr(resource, name), (soft, hard))
    sock = FdSocket(fd)
    table, trusted = [], {}

    def handle_of(obj):
        if type(obj) is _ByHandle:  # a program value too large to send as a value
            obj = obj.value
        table.append(obj)
        return len(table) - 1, kind_of(obj) + ":" + ",".join(c.__name__ for c in type.__getattribute__(
            obj if isinstance(obj, type) else type(obj), "__mro__"))

    def alarm(signum, frame):
        raise TimeoutError("the server's per-call timer")

    def reply(fn):
        try:
            signal.setitimer(signal.ITIMER_REAL, test_timeout_s)
            try:
                return ("ok",) + fn()
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except BaseException as e:
            return ("raise", [c.__name__ for c in type(e).__mro__], str(e)[:200])

    def setattr_(obj, name, value):
        setattr(obj, name, value)
        return None, ()

    signal.signal(signal.SIGALRM, alarm)
    ns = {"__name__": "__main__"}
    while True:
        data = recv_frame(sock)
        if data is None:
            return
        req = decode(data, make_handle=lambda k, kind: table[k], trusted=trusted)
        if req[0] == "exec":
            out = reply(lambda: (exec(compile(req[1], "<program>", "exec"), ns), None))
            if out[0] == "ok":
                trusted.update((n, ns[n]) for n in req[2] if isinstance(ns.get(n), type))
                mods = _modules(ns)
                out = ("names", _values_or_handles({k: v for k, v in ns.items() if not k.startswith("__") and k not in mods},
                                                   tuple(trusted.values())), mods)
        elif req[0] == "call":
            out = reply(lambda: (req[1](*req[2], **req[3]), req[2]))
        elif req[0] == "getattr":
            out = reply(lambda: (getattr(req[1], req[2]), ()))
        elif req[0] == "setattr":
            out = reply(lambda: setattr_(req[1], req[2], req[3]))
        elif req[0] == "op":
            out = reply(lambda: (OPS[req[2]](req[1], *req[3]), req[3]))
        else:
            out = ("raise", ["ValueError"], f"unknown request {req[0]!r}")
        try:
            payload = encode(out, handle_of=handle_of, trusted=tuple(trusted.values()))
        except BaseException as e:  # a value the wire cannot carry and no handle for it
            payload = encode(("raise", ["TypeError"], f"the reply does not encode: {e}"[:200]))
        send_frame(sock, payload)


if __name__ == "__main__":  # argv: the socket's fd, the per-call timer, marshal.dumps(rlimits).hex()
    import marshal
    serve(int(sys.argv[1]), float(sys.argv[2]), marshal.loads(bytes.fromhex(sys.argv[3])))
