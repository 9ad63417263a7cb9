"""Assert-style tests split across two processes (stdlib only; runs INSIDE the sandbox, beside runner.py).

An assert test (`def check(candidate): assert candidate(2, 3) == 5`, MBPP's assert lines) cannot be run in
the program's own process and be trusted: there the program can rebind `check`, patch `exec` or the
builtins, hand over an object whose `__eq__` is always true, or write the harness's success signal itself.
So a test runs in two processes:

- the program process executes the program and then only answers requests: call this function with these
  arguments, read or set this attribute. What it returns travels back pickled; a value of an exact built-in
  type (int, float, complex, str, bytes, bool, None, and lists, tuples, dicts, sets, frozensets of those)
  travels as the value, anything else stays in the program process and travels as an opaque handle.
- the judge process (judge_process.py: one per sandbox, kept warm) runs the test's own code (and the label's trusted prelude) with the program's names
  resolved on demand to proxies. It never runs a line of the program: every value it compares was built by
  its own unpickler, which makes nothing but built-in plain values and handles. A handle can be called and
  have attributes read and set (MBPP builds trees of the program's `Node` class that way); any use that needs
  its value (==, <, bool, hash, str, len, iteration, arithmetic) fails the test with a verdict that names
  the program's type, even where the test would catch the exception.

The verdict is the code `judge()` returns, which the judge process sends the harness on a socket only the two
of them hold: 0 only when `check` returned and no handle was used as a value. The program process cannot
write the judge's memory or that socket: the judge is another process, not dumpable, and the program has no
capabilities; it can only kill or stop it, which fails its own test.

The program process is forked before the harness reads the test, so neither the test's source nor its
expected values were ever in its memory. Names the test reads resolve in this order: the test's and the
prelude's own definitions, then Python's builtins and standard-library modules (the judge's own, so a
program's `len` or fake `math` module is never used by the test), then the program's names.
"""

import builtins
import importlib
import io
import os
import pickle
import struct
import sys

from child import EXIT_MEMORY, EXIT_NOT_PLAIN, EXIT_PROGRAM_GONE, EXIT_WRONG, NotPlainValue

TEST_FILES = ("<test>", "<prelude>")
# Standard-library mappings whose equality is a dict's: they travel as plain dicts.
_DICT_LIKE = ("Counter", "OrderedDict", "defaultdict")
_LENGTH = struct.Struct(">I")
_BUILTIN_NAMES = frozenset(dir(builtins))
_STDLIB_MODULES = frozenset(getattr(sys, "stdlib_module_names", ()))


class ProgramGone(Exception):
    """The program process closed its end or sent something that is not a reply."""


# -- frames: 4-byte length, then a pickle -----------------------------------------------------------------


def write_frame(fd: int, data: bytes) -> None:
    """One frame, in one write when the pipe takes it whole (a request or a reply usually does)."""
    frame = _LENGTH.pack(len(data)) + data
    written = os.write(fd, frame)
    if written < len(frame):
        _write_rest(fd, frame, written)


def _write_rest(fd: int, frame: bytes, written: int) -> None:
    view = memoryview(frame)[written:]
    while view:
        view = view[os.write(fd, view) :]


class FrameReader:
    """Frames from a pipe, read in chunks: a reply usually arrives whole with one read, and is then handed on
    as that read's bytes, copied no further."""

    def __init__(self, fd: int, limit: int) -> None:
        self.fd, self.limit, self.buffer = fd, limit, bytearray()

    def read(self) -> bytes | None:
        """One frame with its 4-byte length in front (its payload starts at FRAME_START), or None at end of
        file; ProgramGone for a frame over the limit or cut short."""
        if not self.buffer:
            chunk = os.read(self.fd, 1 << 16)
            if len(chunk) > _LENGTH.size:
                (size,) = _LENGTH.unpack_from(chunk)
                if len(chunk) == _LENGTH.size + size and size <= self.limit:
                    return chunk  # the usual case: exactly one whole frame
            if not chunk:
                return None
            self.buffer += chunk
        if not self._fill(_LENGTH.size):
            raise ProgramGone("the reply was cut short")
        (size,) = _LENGTH.unpack_from(self.buffer)
        if size > self.limit:
            raise ProgramGone(f"a reply of {size} bytes is over the output limit")
        if not self._fill(_LENGTH.size + size):
            raise ProgramGone("the reply was cut short")
        frame = bytes(self.buffer[: _LENGTH.size + size])
        del self.buffer[: _LENGTH.size + size]
        return frame

    def _fill(self, size: int) -> bool:
        while len(self.buffer) < size:
            chunk = os.read(self.fd, max(1 << 16, size - len(self.buffer)))
            if not chunk:
                return False
            self.buffer += chunk
        return True


FRAME_START = _LENGTH.size


# -- the program process ------------------------------------------------------------------------------------

_OBJECTS: list = []  # the program process's objects the judge holds handles to, by index


def _program_object(index: int) -> object:
    """What a handle the judge sends back stands for (called by unpickling, in the program process)."""
    return _OBJECTS[index]


def _handle(index: int, type_name: str) -> object:
    """Named in replies; the judge's unpickler puts its own Handle factory in its place (find_class)."""
    raise pickle.UnpicklingError("handles are made by the judge")


class _ReplyPickler(pickle.Pickler):
    """Plain values as themselves (pickle's fast paths never call reducer_override for exact built-in
    types); anything else as a handle the judge can only send back."""

    def reducer_override(self, obj: object) -> object:
        if obj is complex or obj is dict or obj is _handle or type(obj) is complex:
            return NotImplemented  # complex pickles as complex(real, imag); the rest are names
        kind = type(obj)
        if isinstance(obj, dict) and kind.__module__ == "collections" and kind.__name__ in _DICT_LIKE:
            return dict, (list(dict.items(obj)),)
        _OBJECTS.append(obj)
        return _handle, (len(_OBJECTS) - 1, kind.__qualname__)


class _Replies:
    """The program process's reply frames, pickled by one pickler into one buffer for the whole test (making a
    pickler costs more than pickling a small reply), the frame's length written in front in place."""

    def __init__(self) -> None:
        self.buffer = io.BytesIO()
        self.pickler: _ReplyPickler | None = _ReplyPickler(self.buffer, protocol=5)

    def value(self, value: object) -> bytes:
        buffer = self.buffer
        buffer.seek(0)
        buffer.truncate()
        buffer.write(b"\0\0\0\0v")
        pickler = self.pickler or _ReplyPickler(buffer, protocol=5)
        self.pickler = None  # until the dump succeeds: one that failed halfway is not used again
        pickler.dump(value)
        pickler.clear_memo()
        self.pickler = pickler
        size = buffer.tell() - _LENGTH.size
        buffer.seek(0)
        buffer.write(_LENGTH.pack(size))
        return buffer.getvalue()


# Made once in the harness, which imports this module, and inherited unused by every program process.
_REPLIES = _Replies()


def _frame(data: bytes) -> bytes:
    return _LENGTH.pack(len(data)) + data


def _write_all(fd: int, frame: bytes) -> None:
    written = os.write(fd, frame)
    if written < len(frame):
        _write_rest(fd, frame, written)


def serve_program(namespace: dict, entry_point: str, requests: int, replies: int, limit: int) -> None:
    """Answer the judge's requests until it closes its end (runs in the program process). The first reply,
    unasked, is the entry point's: the judge needs it first, and it saves a round trip."""
    out = _REPLIES
    _write_all(replies, _reply_to(("name", entry_point), namespace, out))
    read = FrameReader(requests, limit).read
    while True:
        frame = read()
        if frame is None:
            return
        try:
            # the judge's own pickle: plain values and _program_object refs
            message = pickle.loads(memoryview(frame)[FRAME_START:])
        except BaseException as error:
            message = error
        _write_all(replies, _reply_to(message, namespace, out))


def _reply_to(message: object, namespace: dict, out: _Replies) -> bytes:
    """The reply's whole frame."""
    try:
        if isinstance(message, BaseException):
            raise message
        op, target, *rest = message
        if op == "call":
            args, kwargs = rest
            value = _OBJECTS[target](*args, **kwargs)
        elif op == "name":
            if target not in namespace:
                return _frame(b"m")
            value = namespace[target]
        elif op == "getattr":
            value = getattr(_OBJECTS[target], rest[0])
        elif op == "bool":
            value = bool(_OBJECTS[target])
        else:  # setattr
            setattr(_OBJECTS[target], rest[0], rest[1])
            value = None
        return out.value(value)
    except BaseException as error:  # the program's exception, handed to the test that called it
        return _frame(b"e" + pickle.dumps((type(error).__name__, str(error)[:1000]), protocol=5))


# -- the judge process ----------------------------------------------------------------------------------------


class Program:
    """The judge's side of the program process: requests out, plain values and handles back."""

    def __init__(self, requests: int, replies: int, limit: int) -> None:
        self.requests, self.replies = requests, FrameReader(replies, limit)
        self.refused: str | None = None  # the first program type a test needed the value of
        self.unpickling = False  # a reply must not make the judge call back while it is being read

    def request(self, *message: object) -> object:
        if self.unpickling:
            raise ProgramGone("the program process sent a reply that calls back into it")
        try:
            write_frame(self.requests, pickle.dumps(message, protocol=5))
        except OSError as error:
            raise ProgramGone(f"the program process is gone ({error.strerror})") from None
        return self.reply(message[1])

    def reply(self, name: object = None) -> object:
        """The next reply: a plain value or handle, the program's exception raised, KeyError(name) for a
        name the program does not define."""
        try:
            reply = self.replies.read()
        except OSError as error:
            raise ProgramGone(f"the program process is gone ({error.strerror})") from None
        if reply is None:
            raise ProgramGone("the program process ended before it answered")
        body = io.BytesIO(reply)  # shares the reply's bytes
        body.seek(FRAME_START)
        tag = body.read(1)
        if tag == b"m":
            raise KeyError(name)
        self.unpickling = True
        try:
            value = _PlainUnpickler(body, self).load()
        except Exception as error:
            raise ProgramGone(f"the program process sent a reply that is not plain data ({error})") from None
        finally:
            self.unpickling = False
        if tag == b"v":
            return value
        if tag == b"e" and isinstance(value, tuple) and len(value) == 2:
            raise _program_exception(*value)
        raise ProgramGone("the program process sent a reply of unknown kind")

    def refuse(self, type_name: str) -> NotPlainValue:
        if self.refused is None:
            self.refused = type_name
        return NotPlainValue(
            f"the program gave an object of type {type_name}, not a plain value (int, float, complex, str, bytes, bool, None, "
            "or a list, tuple, dict or set of them)"
        )


def _program_exception(name: object, message: object) -> Exception:
    """The program's exception as the judge raises it: the built-in type of that name when there is one
    (so a test that expects a ValueError sees a ValueError), else a RuntimeError naming it."""
    kind = getattr(builtins, str(name), None)
    if isinstance(kind, type) and issubclass(kind, Exception):
        return kind(str(message))
    return RuntimeError(f"the program raised {name}: {message}")


class Handle:
    """A program object the judge may call, read and set attributes of, or pass back, never compare."""

    __slots__ = ("_program", "_id", "_type")

    def __init__(self, program: Program, handle_id: int, type_name: str) -> None:
        object.__setattr__(self, "_program", program)
        object.__setattr__(self, "_id", handle_id)
        object.__setattr__(self, "_type", type_name)

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self._program.request("call", self._id, args, kwargs)

    def __getattr__(self, name: str) -> object:
        return self._program.request("getattr", self._id, name)

    def __setattr__(self, name: str, value: object) -> None:
        self._program.request("setattr", self._id, name, value)

    def __bool__(self) -> bool:
        # Truth is one bit that does not depend on anything of the test's: a program could as well return
        # that bool, so asking the program for it gives nothing away (unlike ==, which would show it the
        # expected value). MBPP's `assert check_str("annie")` on a re.Match needs it.
        value = self._program.request("bool", self._id)
        if type(value) is not bool:
            raise ProgramGone("the program process answered bool() with something else")
        return value

    def __repr__(self) -> str:
        return f"<the program's {self._type}>"

    def __reduce__(self) -> tuple:
        return _program_object, (self._id,)  # sent back: the program process unpickles its own object


def _refuse(self: Handle, *_: object) -> None:
    raise self._program.refuse(self._type)


# Every use that needs a handle's value; each fails the test with the program's type named.
_VALUE_METHODS = """
__eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __len__ __iter__ __contains__ __getitem__
__str__ __format__ __bytes__ __int__ __float__ __complex__ __index__ __round__ __abs__ __neg__
__pos__ __add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __floordiv__
__rfloordiv__ __mod__ __rmod__ __pow__ __rpow__ __and__ __rand__ __or__ __ror__ __xor__ __rxor__
__lshift__ __rshift__ __invert__ __reversed__
""".split()  # noqa: SIM905
for _name in _VALUE_METHODS:
    setattr(Handle, _name, _refuse)


class _PlainUnpickler(pickle.Unpickler):
    """Builds built-in plain values and handles, nothing else: no class can be named but these two."""

    _ALLOWED = {("builtins", "complex"): complex, ("builtins", "dict"): dict}

    def __init__(self, file: io.BytesIO, program: Program) -> None:
        super().__init__(file)
        self.program = program

    def find_class(self, module: str, name: str) -> object:
        if (module, name) == ("judge", "_handle"):
            return self._make_handle
        try:
            return self._ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"{module}.{name} is not a plain type") from None

    def _make_handle(self, index: object, type_name: object) -> Handle:
        if type(index) is not int or type(type_name) is not str:
            raise pickle.UnpicklingError("a malformed handle")
        return Handle(self.program, index, type_name)


class ProgramNames(dict):
    """The test's globals: its own names first, then builtins and real stdlib modules, then the program's."""

    def __init__(self, program: Program) -> None:
        super().__init__(__builtins__=builtins, __name__="__test__")
        self.program = program

    def __missing__(self, name: str) -> object:
        if name in _BUILTIN_NAMES:
            raise KeyError(name)  # the interpreter then reads the judge's own builtins
        if name in _STDLIB_MODULES:
            value = importlib.import_module(name)
        else:
            value = self.program.request("name", name)
            if type(value) is Handle and value._type == "module":
                value = _stdlib_module(self.program, name, value)
        self[name] = value
        return value


def _stdlib_module(program: Program, name: str, handle: Handle) -> object:
    """A module the program imported under another name (`import heapq as hq`): the judge's own copy when it
    is a standard-library module, else the handle."""
    module_name = handle.__name__
    if isinstance(module_name, str) and module_name.partition(".")[0] in _STDLIB_MODULES:
        return importlib.import_module(module_name)
    return handle


def judge(test: str, prelude: str, entry_point: str, program: Program) -> int:
    """Run the test against the program process; the judge's exit code (runs in the judge process)."""
    namespace = ProgramNames(program)
    try:
        # Compiled while the program process is still running the program, before its first reply.
        test_code = compile(test, "<test>", "exec")
        if prelude:
            exec(compile(prelude, "<prelude>", "exec"), namespace)
        try:
            candidate = program.reply(entry_point)  # sent unasked, before any request
        except KeyError:
            raise NameError(f"the program does not define {entry_point}()") from None
        dict.__setitem__(namespace, entry_point, candidate)  # over the prelude's stub
        exec(test_code, namespace)
        check = dict.get(namespace, "check")
        if check is None:
            raise NameError("the test defines no check(candidate)")
        check(candidate)
    except NotPlainValue as error:
        sys.stderr.write(f"{error}\n")
        return EXIT_NOT_PLAIN
    except ProgramGone as error:
        sys.stderr.write(f"{error}\n")
        return EXIT_PROGRAM_GONE
    except MemoryError:
        sys.stderr.write("MemoryError\n")
        return EXIT_MEMORY
    except BaseException as error:
        sys.__excepthook__(type(error), error, error.__traceback__)
        if program.refused is not None:
            return EXIT_NOT_PLAIN
        return EXIT_WRONG if isinstance(error, AssertionError) and _raised_in_test(error) else 1
    if program.refused is not None:  # the test caught the refusal itself
        sys.stderr.write(f"{program.refuse(program.refused)}\n")
        return EXIT_NOT_PLAIN
    return 0


def _raised_in_test(error: BaseException) -> bool:
    """Whether the failing assert is the test's own (a wrong answer), not a program's exception re-raised."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename in TEST_FILES
