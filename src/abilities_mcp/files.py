"""The project's files read as untrusted input: regular files only, bounded in size, YAML with no aliases and a
limit on nesting — a FIFO, a device, a billion laughs or thousands of nested brackets get a clear message, never a
hang, a crash or a gigabyte. Stdlib only (yaml on first use): the hook reads files through it too.
"""

from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False  # typing's, without importing typing: the hook reads files through this module
if TYPE_CHECKING:
    from typing import IO

# Deeper than this is no hand-written file; libyaml's composer recurses on the C stack and dies a few thousand
# levels down (SIGSEGV), so nesting is measured on the event stream before anything is built.
MAX_NESTING = 100
_KINDS = {stat.S_ISDIR: "a folder", stat.S_ISFIFO: "a FIFO", stat.S_ISCHR: "a device", stat.S_ISBLK: "a device"}


class Unreadable(Exception):
    """Why a file cannot be read, in words for its author."""


def read_text(path: str | os.PathLike[str], max_bytes: int) -> str:
    """A regular file's UTF-8 text, at most `max_bytes`; FileNotFoundError when it is missing, else Unreadable."""
    return decode_text(read_bytes(path, max_bytes + 1), max_bytes)


def decode_text(raw: bytes, max_bytes: int) -> str:
    """A file's bytes as UTF-8 text, refusing more than `max_bytes` (read one byte more to know) with Unreadable."""
    if len(raw) > max_bytes:
        raise Unreadable(f"is larger than {max_bytes} bytes; split it or keep it smaller")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def read_open(fd: int, limit: int) -> bytes:
    """At most `limit` bytes of an open descriptor, which is closed after."""
    try:
        return _read_at_most(fd, limit)
    finally:
        os.close(fd)


def read_bytes(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most `limit` bytes of a regular file; FileNotFoundError when it is missing, else Unreadable."""
    fd = _open_regular(path)
    try:
        return _read_at_most(fd, limit)
    finally:
        os.close(fd)


def open_text(path: str | os.PathLike[str]) -> IO[str]:
    """A regular file opened for reading as UTF-8 text (read it in bounded pieces); Unreadable for anything else."""
    return os.fdopen(_open_regular(path), encoding="utf-8")


def _open_regular(path: str | os.PathLike[str], flags: int = 0) -> int:
    """A descriptor open for reading on a regular file; FileNotFoundError when it is missing, else Unreadable."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP and flags & os.O_NOFOLLOW:
            swapped = "is a link (swapped in since it was checked); only the folder's own files are read"
            raise Unreadable(swapped) from None
        raise Unreadable(f"cannot be read: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = next((name for test, name in _KINDS.items() if test(mode)), "not a regular file")
        raise Unreadable(f"is {kind}, not a regular file; put a regular file there")
    return fd


def open_inside(path: str | os.PathLike[str], folder: str | os.PathLike[str], follow: bool = False) -> int:
    """A descriptor on a regular file that is inside `folder` (a real path) when it is opened: the path was checked
    before, but a link or a FIFO swapped in since must not be followed out or wait for a writer."""
    fd = _open_regular(path, 0 if follow else os.O_NOFOLLOW)
    where = _real_path(fd)
    if where is not None and os.path.commonpath([where, os.fspath(folder)]) != os.fspath(folder):
        os.close(fd)
        raise Unreadable("leads outside its folder (it was swapped for a link); only the folder's own files are read")
    return fd


def _real_path(fd: int) -> str | None:
    """Where an open descriptor's file is, as the kernel knows it (Linux); None where the OS does not say."""
    try:
        import fcntl  # here: the hook reads files through this module and never asks

        if hasattr(fcntl, "F_GETPATH"):  # macOS
            return os.fsdecode(fcntl.fcntl(fd, fcntl.F_GETPATH, bytes(1024)).rstrip(b"\0"))
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def yaml_problem(text: str) -> str | None:
    """Why YAML text must not be loaded (aliases, or nesting past MAX_NESTING), or None. Raises yaml.YAMLError for
    text that does not parse, as loading it would."""
    if "&" not in text and "*" not in text and _nesting_bound(text) <= MAX_NESTING:
        return None  # cannot hold an alias or nest that deep: skip the event pass (most files)
    import yaml

    depth = 0
    too_deep = f"the YAML nests deeper than {MAX_NESTING} levels; flatten it"
    try:
        for event in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                return "YAML anchors and aliases (&name / *name) are not allowed; write the value out"
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_NESTING:
                    return too_deep
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError as exc:
        if "nesting depth" in str(exc):  # PyYAML 6.0.4 and later stop at a depth of their own, before ours
            return too_deep
        raise
    return None


def _nesting_bound(text: str) -> int:
    """An upper bound on how deep YAML text can nest: each level needs a bracket, a `- ` or more indentation."""
    indent = max((len(line) - len(line.lstrip(" ")) for line in text.splitlines()), default=0)
    return text.count("[") + text.count("{") + text.count("- ") + text.count("? ") + indent + 1


def inside(path: str, root: str) -> str | None:
    """`path` relative to `root`, with `/` between names, when it is inside it (`.` for root itself), else None:
    Path.relative_to's answer, on text, by the names as written (no link followed, no `..` undone)."""
    if path == root:
        return "."
    within = path.removeprefix(root.rstrip(os.sep) + os.sep)
    return within.replace(os.sep, "/") if within != path else None
