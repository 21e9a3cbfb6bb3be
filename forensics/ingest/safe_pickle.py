"""Read plain data out of a pickle without unpickling it.

``pickle.load`` runs whatever the file tells it to (``GLOBAL`` + ``REDUCE`` is a
function call), so an untrusted pickle is never handed to it. :func:`load_plain`
walks the opcodes with :func:`pickletools.genops` and builds only ``dict``,
``list``, ``tuple``, ``str``, ``bytes``, ``int``, ``float``, ``bool`` and ``None``
(sets become lists). Every opcode that names, calls or builds an object
(``GLOBAL``, ``STACK_GLOBAL``, ``REDUCE``, ``BUILD``, ``INST``, ``OBJ``, ``NEWOBJ``,
``NEWOBJ_EX``, ``PERSID``, ``BINPERSID``, ``EXT*``, out-of-band buffers) makes the
whole read fail with :class:`UnsafePickle`, naming the opcode and its byte offset.

PyTorch's NCCL flight-recorder dumps (protocol 2: a dict of strings, ints, lists,
tuples, bools and None) are the pickles this project meets.
"""

from __future__ import annotations

import pickletools
from typing import Any

__all__ = ["MAX_NODES", "PickleError", "UnsafePickle", "is_pickle", "load_plain", "plain_nodes"]

#: A pickle may reference one object many times (memo ``GET``); walks of the result
#: (JSON, copies) count each reference, so they stop past this many values.
MAX_NODES = 5_000_000

_REFUSED = frozenset({
    "GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX",
    "PERSID", "BINPERSID", "EXT1", "EXT2", "EXT4", "NEXT_BUFFER", "READONLY_BUFFER",
})
_SCALARS = frozenset({
    "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
    "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE",
    "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8",
})
_CONSTANTS: dict[str, Any] = {"NONE": None, "NEWTRUE": True, "NEWFALSE": False}
_NOOPS = frozenset({"PROTO", "FRAME"})


class PickleError(ValueError):
    """The bytes are not a pickle this reader can turn into plain data."""


class UnsafePickle(PickleError):
    """The pickle names or builds objects (it would run code if unpickled)."""


class _Mark:
    __slots__ = ()


_MARK = _Mark()


def is_pickle(raw: bytes) -> bool:
    """True for what starts like a binary pickle (protocol 2–5: ``\\x80`` and the protocol byte);
    a damaged one (cut off mid-write) is still a pickle, and :func:`load_plain` says what is wrong."""
    return len(raw) >= 2 and raw[0] == 0x80 and 2 <= raw[1] <= 5


def _scalar(name: str, arg: Any) -> Any:
    if name in ("STRING", "BINSTRING", "SHORT_BINSTRING"):
        # Python 2 ``str``: text when it is ASCII (what pickle itself assumes), else bytes.
        raw = arg if isinstance(arg, bytes) else str(arg).encode("latin-1", "replace")
        try:
            return raw.decode("ascii")
        except UnicodeDecodeError:
            return raw
    if name == "BYTEARRAY8":
        return bytes(arg)
    return arg


def _slot(arg: Any) -> int:
    if not isinstance(arg, int):
        raise PickleError(f"a memo slot that is not a number: {arg!r}")
    return arg


def _pop_mark(stack: list[Any], name: str, pos: int) -> list[Any]:
    for i in range(len(stack) - 1, -1, -1):
        if stack[i] is _MARK:
            items = stack[i + 1:]
            del stack[i:]
            return items
    raise PickleError(f"{name} without a MARK at byte {pos}")


def _pop(stack: list[Any], name: str, pos: int) -> Any:
    if not stack or stack[-1] is _MARK:
        raise PickleError(f"{name} on an empty stack at byte {pos}")
    return stack.pop()


def _top(stack: list[Any], kind: type, name: str, pos: int) -> Any:
    if not stack or not isinstance(stack[-1], kind):
        raise PickleError(f"{name} needs a {kind.__name__} on the stack at byte {pos}")
    return stack[-1]


def _set_items(target: dict[Any, Any], items: list[Any], name: str, pos: int) -> None:
    if len(items) % 2:
        raise PickleError(f"{name} with an odd number of items at byte {pos}")
    for k, v in zip(items[::2], items[1::2], strict=True):
        try:
            target[k] = v
        except TypeError as exc:  # an unhashable key (a list)
            raise PickleError(f"{name} with an unhashable key at byte {pos}") from exc


def load_plain(raw: bytes) -> Any:
    """The value a pickle describes, built from plain Python data only.

    Raises :class:`UnsafePickle` for any opcode that would import, call or build an
    object, and :class:`PickleError` for damaged or unsupported input. Never unpickles.
    """
    stack: list[Any] = []
    memo: dict[int, Any] = {}
    try:
        for op, arg, pos in pickletools.genops(raw):
            name = op.name
            p = pos if pos is not None else -1
            if name in _REFUSED:
                what = f" {str(arg)[:80]!r}" if arg is not None else ""
                raise UnsafePickle(f"the pickle names or builds objects ({name}{what} at byte {p}); "
                                   f"not unpickled")
            if name in _NOOPS:
                continue
            if name == "STOP":
                if len(stack) != 1 or stack[0] is _MARK:
                    raise PickleError(f"STOP with {len(stack)} values on the stack at byte {p}")
                return stack[0]
            if name in _SCALARS:
                stack.append(_scalar(name, arg))
            elif name in _CONSTANTS:
                stack.append(_CONSTANTS[name])
            elif name == "MARK":
                stack.append(_MARK)
            elif name == "POP":
                _pop(stack, name, p)
            elif name == "POP_MARK":
                _pop_mark(stack, name, p)
            elif name == "DUP":
                stack.append(_pop(stack, name, p))
                stack.append(stack[-1])
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                if not stack or stack[-1] is _MARK:
                    raise PickleError(f"{name} on an empty stack at byte {p}")
                memo[_slot(arg)] = stack[-1]
            elif name == "MEMOIZE":
                if not stack or stack[-1] is _MARK:
                    raise PickleError(f"MEMOIZE on an empty stack at byte {p}")
                memo[len(memo)] = stack[-1]
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                if _slot(arg) not in memo:
                    raise PickleError(f"{name} of an unknown memo slot {arg} at byte {p}")
                stack.append(memo[_slot(arg)])
            elif name == "EMPTY_LIST":
                stack.append([])
            elif name == "EMPTY_DICT":
                stack.append({})
            elif name == "EMPTY_TUPLE":
                stack.append(())
            elif name == "EMPTY_SET":
                stack.append([])
            elif name == "LIST":
                stack.append(_pop_mark(stack, name, p))
            elif name == "TUPLE":
                stack.append(tuple(_pop_mark(stack, name, p)))
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                n = int(name[-1])
                items = [_pop(stack, name, p) for _ in range(n)][::-1]
                stack.append(tuple(items))
            elif name == "FROZENSET":
                stack.append(_pop_mark(stack, name, p))
            elif name == "DICT":
                d: dict[Any, Any] = {}
                _set_items(d, _pop_mark(stack, name, p), name, p)
                stack.append(d)
            elif name == "APPEND":
                value = _pop(stack, name, p)
                _top(stack, list, name, p).append(value)
            elif name in ("APPENDS", "ADDITEMS"):
                items = _pop_mark(stack, name, p)
                _top(stack, list, name, p).extend(items)
            elif name == "SETITEM":
                value = _pop(stack, name, p)
                key = _pop(stack, name, p)
                _set_items(_top(stack, dict, name, p), [key, value], name, p)
            elif name == "SETITEMS":
                items = _pop_mark(stack, name, p)
                _set_items(_top(stack, dict, name, p), items, name, p)
            else:
                raise PickleError(f"unsupported pickle opcode {name} at byte {p}")
    except PickleError:
        raise
    except (ValueError, TypeError, OverflowError, MemoryError, UnicodeError) as exc:
        raise PickleError(f"damaged pickle: {exc}") from exc
    raise PickleError("the pickle ends without STOP")


def _children(v: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> list[Any]:
    return [x for kv in v.items() for x in kv] if isinstance(v, dict) else list(v)


def plain_nodes(value: Any, limit: int = MAX_NODES, max_depth: int = 200) -> int:
    """How many values a walk of ``value`` meets, shared references counted each time (what
    JSON text of it would hold), computed once per container.

    Raises :class:`PickleError` past ``limit`` values, past ``max_depth`` levels of nesting,
    or when a value contains itself (a memo reference can build a loop).
    """
    done: dict[int, tuple[int, int]] = {}  # id(container) -> (values, depth)
    on_path: set[int] = set()
    todo: list[tuple[Any, bool]] = [(value, False)]
    while todo:
        v, finished = todo.pop()
        if not isinstance(v, dict | list | tuple):
            continue
        key = id(v)
        if finished:
            n, depth = 1, 1
            for c in _children(v):
                if isinstance(c, dict | list | tuple):
                    cn, cd = done[id(c)]
                    n += cn
                    depth = max(depth, cd + 1)
                else:
                    n += 1
            on_path.discard(key)
            if n > limit:
                raise PickleError(f"the pickle expands to more than {limit:,} values")
            if depth > max_depth:
                raise PickleError(f"the pickle nests deeper than {max_depth} levels")
            done[key] = (n, depth)
            continue
        if key in done:
            continue
        if key in on_path:
            raise PickleError("the pickle contains itself (a loop of references)")
        on_path.add(key)
        todo.append((v, True))
        todo.extend((c, False) for c in _children(v) if isinstance(c, dict | list | tuple) and id(c) not in done)
    return done[id(value)][0] if isinstance(value, dict | list | tuple) else 1
