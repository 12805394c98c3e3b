"""File descriptors passed over a unix socket with ``SCM_RIGHTS`` (standard library only:
the spawn server loads it by path, as it does its other modules): the host, the spawn
server and a server of one sandbox hand each other streams, sockets and held folders."""

import _socket  # the C module: what `socket` wraps, without its enum imports
import sys


def fd_bytes(fds: "list[int]") -> bytes:
    """``fds`` as the data of an ``SCM_RIGHTS`` message."""
    return b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds)


def rights(fds: "list[int]") -> "list[tuple[int, int, bytes]]":
    """The ancillary data of ``sendmsg`` that passes ``fds`` (none: no ancillary data)."""
    return [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fd_bytes(fds))] if fds else []


def received_fds(ancdata: "list[tuple[int, int, bytes]]") -> "list[int]":
    """The descriptors ``recvmsg`` received (now open in this process)."""
    fds: list[int] = []
    for level, kind, data in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds.extend(int.from_bytes(data[i:i + 4], sys.byteorder, signed=True) for i in range(0, usable, 4))
    return fds
