"""
The wire between the checker and the program server (docs/code-task.md, "A reward that cannot be
gamed"): values as bytes and back, so that what the checker compares is a builtin it built itself, never
an object the program made. Standard library only; the server gets this file compiled with its own.

A value is a graph, written depth first as tagged nodes:
    N None   T True   F False   i int (decimal digits)   f float (8 bytes, IEEE 754)   c complex
    s str (UTF-8, surrogates passed)   b bytes   r range (start, stop, step)
    L list   U tuple   D dict   S set   Z frozenset      (a count, then the items; D: key, value)
    R a back-reference to the k-th list, dict, set or object opened so far (shared and cyclic values)
    O an instance of a TRUSTED class (one the test's own code defines on both sides, LeetCode's ListNode):
      its class name, then (attribute, value) pairs; rebuilt as object.__new__ of the receiver's own
      class of that name, attributes written into its __dict__ (none may shadow the class's own)
    H a handle: an object that stays in the program server (id, kind)     K a callback into the checker (id)
    m a regular-expression match, as its span and group(0), rebuilt as a Match of this file
    y a builtin class by name (int, str, ValueError: `remove_datatype(xs, int)`), the receiver's own
Counts and lengths are unsigned LEB128. decode() is iterative (no recursion limit to hit), bounded in
nodes, depth, range length and the digits of an int (refused before the value is built), and builds
builtin types only (plus Match, the receiver's trusted
classes and whatever its handle / callback makers return). encode() reads values by exact type,
through builtin methods only (dict.items, list iteration), so an object's own methods never run.

    from sandbox.wire import encode, decode
    decode(encode([1, (2.5, "a"), {3: {4}}]))    # [1, (2.5, 'a'), {3: {4}}]
"""
import builtins
import struct
import sys

MAX_NODES = 1_000_000   # nodes per message; also the longest range (a range(3 * 10**7) reply took the
                        # checker to 1.16 GB once a test listed it: refused before it is built)
MAX_DEPTH = 10_000      # nesting: a 900,000-deep tuple in a set segfaulted the checker (tuple hashing
                        # recurses in C; 100,000 deep already crashes CPython 3.11 here). LeetCode's
                        # deepest honest value, a linked list of records, is a few dozen deep
MAX_INT_DIGITS = 4300   # CPython's own limit on int <-> str conversion
_F, _C = struct.Struct(">d"), struct.Struct(">dd")
_NoneType = type(None)
# the standard library's dict subclasses that honest solutions return (MBPP 40, 88: a Counter): sent
# as the plain dict of their items, read by dict's own C code
VETTED_DICT_NAMES = ("Counter", "OrderedDict", "defaultdict")
_dict_items, _str_encode, _bytes_decode = dict.items, str.encode, bytes.decode


def _stdlib_types():
    """(re's Match type or None, the vetted dict classes), from the modules already loaded: a match or a
    Counter cannot exist before re or collections is imported, and the program server, which imports
    neither, must not pay their ~10 ms at every start (its encoder's answers are never trusted anyway)."""
    re, coll = sys.modules.get("re"), sys.modules.get("collections")
    match = type(re.match("", "")) if re is not None else None
    return match, (dict, *(getattr(coll, n) for n in VETTED_DICT_NAMES)) if coll is not None else (dict,)


class WireError(ValueError):
    """A message that does not decode (garbled, truncated, too big, a type it may not carry)."""


class Match:
    """A regular-expression match as it arrives: truthy, its span and group(0). Honest solutions return
    re.search's result for a truth test (MBPP+ 737, 787, 794)."""
    __slots__ = ("_span", "_text")

    def __init__(self, span, text):
        self._span, self._text = span, text

    def group(self, n=0):
        if n != 0:
            raise IndexError("only group 0 travels")
        return self._text

    def span(self):
        return self._span

    def start(self):
        return self._span[0]

    def end(self):
        return self._span[1]

    def __repr__(self):
        return f"<Match span={self._span!r} match={self._text!r}>"


def _builtin_class(cls):
    """cls is the class that this process's builtins module holds under its name (int, ValueError)."""
    name = type.__getattribute__(cls, "__name__")
    return type(name) is str and getattr(builtins, name, None) is cls


def _one_of(t, classes):
    """t is one of classes, by identity (`in` would ask a metaclass's __eq__)."""
    return any(t is c for c in classes)


def _uint(out, n):
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _text(out, s):
    data = _str_encode(s, "utf-8", "surrogatepass")
    _uint(out, len(data))
    out += data


def encode(value, *, trusted=(), handle_of=None, callback_of=None):
    """value -> bytes. `trusted`: the classes whose instances travel as O records (exact type); anything
    else that is not a builtin value goes to `callback_of(obj)` (the checker: its callables) or
    `handle_of(obj) -> (id, kind)` (the server: its objects), and raises TypeError without them."""
    out, stack, opened, trusted = bytearray(), [value], {}, tuple(trusted)
    match_type, vetted_dicts = _stdlib_types()
    while stack:
        v = stack.pop()
        t = type(v)
        if t is _NoneType:
            out += b"N"
        elif t is bool:
            out += b"T" if v else b"F"
        elif t is int:
            digits = int.__repr__(v).encode("ascii")  # a ValueError past sys.int_info's digit limit
            out += b"i"
            _uint(out, len(digits))
            out += digits
        elif t is float:
            out += b"f" + _F.pack(v)
        elif t is complex:
            out += b"c" + _C.pack(v.real, v.imag)
        elif t is str:
            out += b"s"
            _text(out, v)
        elif t is bytes:
            out += b"b"
            _uint(out, len(v))
            out += v
        elif t is range:
            out += b"r"
            stack.extend((v.step, v.stop, v.start))
        elif t is type and _builtin_class(v):
            out += b"y"
            _text(out, type.__getattribute__(v, "__name__"))
        elif t is tuple or t is frozenset:
            out += b"U" if t is tuple else b"Z"
            _uint(out, len(v))
            stack.extend(reversed(list(v)))
        elif t is match_type:
            out += b"m"
            stack.extend((v.group(0), v.span()))
        elif id(v) in opened:  # a list, dict, set or object met before: a reference
            out += b"R"
            _uint(out, opened[id(v)][0])
        elif t is list or t is set or _one_of(t, vetted_dicts) or _one_of(t, trusted):
            opened[id(v)] = (len(opened), v)  # keeps v alive, so its id stays unique
            if t is list or t is set:
                items = list(v)
                out += b"L" if t is list else b"S"
            elif _one_of(t, vetted_dicts):
                items = [x for kv in _dict_items(v) for x in kv]
                out += b"D"
            else:
                out += b"O"
                _text(out, t.__name__)
                items = [x for kv in _dict_items(object.__getattribute__(v, "__dict__")) for x in kv]
            _uint(out, len(items) if t is list or t is set else len(items) // 2)
            stack.extend(reversed(items))
        elif callback_of is not None and callable(v) and (k := callback_of(v)) is not None:
            out += b"K"
            _uint(out, k)
        elif handle_of is not None:
            k, kind = handle_of(v)
            out += b"H"
            _uint(out, k)
            _text(out, kind)
        else:
            raise TypeError(f"not a value the wire carries: {t.__name__}")
    return bytes(out)


class _Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        end = self.pos + n
        if end > len(self.data):
            raise WireError("truncated")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def uint(self):
        n = shift = 0
        while True:
            byte = self.take(1)[0]
            n |= (byte & 0x7F) << shift
            if byte < 0x80:
                return n
            shift += 7
            if shift > 63:
                raise WireError("a count too large")

    def text(self):
        try:
            return _bytes_decode(self.take(self.uint()), "utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise WireError("not UTF-8") from None


def decode(data, *, trusted=None, make_handle=None, make_callback=None, max_nodes=MAX_NODES):
    """bytes -> the value, or WireError. `trusted`: {class name: class} for O records; `make_handle(id,
    kind)` / `make_callback(id)` build what H / K stand for (without them those tags are refused)."""
    r, opened, nodes = _Reader(bytes(data)), [], 0
    root = []
    # each frame: [container being filled, items still to read, kind, collected items]
    frames = [[root, 1, "root", root]]
    while frames:
        frame = frames[-1]
        if frame[1] == 0:
            frames.pop()
            _close(frame)
            if frames:
                _put(frames[-1], frame[0])
            continue
        frame[1] -= 1
        nodes += 1
        if nodes > max_nodes:
            raise WireError("too many nodes")
        tag = r.take(1)
        if tag == b"N":
            _put(frame, None)
        elif tag == b"T" or tag == b"F":
            _put(frame, tag == b"T")
        elif tag == b"i":
            n = r.uint()
            if n > MAX_INT_DIGITS + 1:
                raise WireError("an int with too many digits")
            digits = r.take(n)
            if not (digits[1:] if digits[:1] == b"-" else digits).isdigit():  # bytes: ASCII digits only
                raise WireError("not an int")
            _put(frame, int(digits))
        elif tag == b"f":
            _put(frame, _F.unpack(r.take(8))[0])
        elif tag == b"c":
            _put(frame, complex(*_C.unpack(r.take(16))))
        elif tag == b"s":
            _put(frame, r.text())
        elif tag == b"y":
            cls = getattr(builtins, r.text(), None)
            if type(cls) is not type or not _builtin_class(cls):
                raise WireError("not a builtin class")
            _put(frame, cls)
        elif tag == b"b":
            _put(frame, r.take(r.uint()))
        elif tag in (b"U", b"Z", b"r", b"m"):  # immutable: built when its items are in
            n = {b"r": 3, b"m": 2}.get(tag) or r.uint()
            _push(frames, [None, n, tag.decode(), []])
        elif tag in (b"L", b"S", b"D", b"O"):  # mutable: opened now, so that later R can point here
            kind = tag.decode()
            if kind == "O":
                name = r.text()
                cls = (trusted or {}).get(name)
                if cls is None:
                    raise WireError(f"an object of a class that is not trusted: {name!r}")
                obj = object.__new__(cls)
            else:
                obj = {"L": list, "S": set, "D": dict}[kind]()
            opened.append(obj)
            n = r.uint()
            _push(frames, [obj, 2 * n if kind in ("D", "O") else n, kind, []])
        elif tag == b"R":
            k = r.uint()
            if k >= len(opened):
                raise WireError("a reference to nothing")
            _put(frame, opened[k])
        elif tag == b"H" and make_handle is not None:
            _put(frame, make_handle(r.uint(), r.text()))
        elif tag == b"K" and make_callback is not None:
            _put(frame, make_callback(r.uint()))
        else:
            raise WireError(f"a tag it may not carry: {tag!r}")
    if r.pos != len(r.data):
        raise WireError("trailing bytes")
    return root[0]


def _push(frames, frame):
    """A container opened one level deeper, refused past MAX_DEPTH (the root frame is not a level)."""
    if len(frames) > MAX_DEPTH:
        raise WireError("a value nested too deeply")
    frames.append(frame)


def _put(frame, item):
    """An item read into the frame being filled (pairs for D and O are put when both halves are in)."""
    container, _, kind, items = frame
    if kind == "root" or kind == "L":
        container.append(item)
    elif kind == "S":
        try:
            container.add(item)
        except TypeError:
            raise WireError("an unhashable set element") from None
    elif kind in ("D", "O"):
        items.append(item)
        if len(items) == 2:
            key, value = items
            items.clear()
            if kind == "D":
                try:
                    container[key] = value
                except TypeError:
                    raise WireError("an unhashable dict key") from None
            else:
                if type(key) is not str or hasattr(type(container), key) or key.startswith("__"):
                    raise WireError(f"an attribute a trusted object may not set: {key!r}")
                object.__getattribute__(container, "__dict__")[key] = value
    else:
        items.append(item)


def _close(frame):
    """An immutable value, built once its items are in."""
    _, _, kind, items = frame
    try:
        if kind == "U":
            frame[0] = tuple(items)
        elif kind == "Z":
            frame[0] = frozenset(items)
        elif kind == "r":
            if not all(type(x) is int for x in items):
                raise WireError("a range of non-ints")
            frame[0] = range(*items)
            if len(frame[0]) > MAX_NODES:  # OverflowError past sys.maxsize: caught below, refused too
                raise WireError("a range too long")
        elif kind == "m":
            span, text = items
            if not (type(span) is tuple and len(span) == 2 and all(type(x) is int for x in span) and type(text) is str):
                raise WireError("a malformed match")
            frame[0] = Match(span, text)
    except (TypeError, ValueError, OverflowError) as e:  # an unhashable frozenset element, a zero range step
        raise WireError(f"a malformed {kind}: {e}") from None
