"""The few C calls the job supervisor and the sandbox make (``prctl``, ``syscall``,
``mount``, ``unshare``), through the ``_ctypes`` C module directly. Standard library
only: the supervisor loads it by path.

Why not ``ctypes``: importing it costs the supervisor ~5 ms of CPU (it builds its type
cache and a callback trampoline), and a supervisor starts for every exec tool, ripgrep
and bash call (docs/benchmarks.md, exec tools). Only what those calls need is defined here; the types behave
as ctypes' own (``ctypes.c_uint64`` is the same ``_SimpleCData`` with type code "Q").
"""

import _ctypes
import os

TYPE_CHECKING = False  # True for the type checker only (importing typing costs a start)
if TYPE_CHECKING:
    _Int = _ctypes._SimpleCData[int]
else:
    _Int = _ctypes._SimpleCData  # not subscriptable at run time

Structure = _ctypes.Structure
byref = _ctypes.byref
sizeof = _ctypes.sizeof
get_errno = _ctypes.get_errno


class c_int(_Int):
    _type_ = "i"


class c_int32(_Int):
    _type_ = "i"


class c_uint32(_Int):
    _type_ = "I"


class c_uint64(_Int):
    _type_ = "Q"


class c_ulong(_Int):
    _type_ = "L"


c_size_t = c_ulong  # size_t is unsigned long on Linux


class _Function(_ctypes.CFuncPtr):
    """A C function returning int, keeping errno for :func:`get_errno` (as
    ``ctypes.CDLL(None, use_errno=True)``'s functions)."""

    _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
    _restype_ = c_int


class Libc:
    """The C library of this process: ``Libc().prctl(...)`` calls ``prctl``. A missing
    function raises AttributeError (as ctypes does)."""

    def __init__(self) -> None:
        # "" is the running program and the libraries it loaded (glibc's dlopen(NULL)).
        self._handle = _ctypes.dlopen("", os.RTLD_NOW)

    def __getattr__(self, name: str) -> _Function:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            function = _Function(_ctypes.dlsym(self._handle, name))
        except OSError as exc:
            raise AttributeError(name) from exc
        setattr(self, name, function)
        return function
