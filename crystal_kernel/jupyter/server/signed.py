"""Which listed sessions a Crystal Home signed (TRUST-7), for the sidebar's session list.

``/sessions`` marks a session that is not the last save its Home signed ``(unverified)``
(host/store.py). The sidebar's list must say the same, but it is read by the Jupyter
server (server/transcripts.py) or by a kernel over the sidebar comm, and "signed" means
signed by the Home of the kernels that write the sessions:

- over the comm, that is the kernel's own Home (:func:`crystal_kernel.core.paths.home_dir`
  in the kernel);
- in the server, it is the Home the server gives the Crystal kernels it starts: the
  ``CRYSTAL_HOME`` of a Crystal kernelspec's ``env``, else the server's own
  (server/base.py ``kernel_homes``). A session any of those Homes signed is signed.

The key is read from the Home each time, never from the process's cache of keys
(host/grants.py): the server runs for days, and a Home may be made again meanwhile (a
new key; the browser tests do this for each module), which a cached key would take for
a stranger's.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from crystal_kernel.core.secrets import register_host_secret
from crystal_kernel.host.grants import KEY_FILE
from crystal_kernel.host.journal import summary_signed
from crystal_kernel.host.journal_sign import Signer, resolved_workspace

#: The shortest key a Home may hold (host/grants.py refuses shorter ones too).
_MIN_KEY_BYTES = 16


def _key(home: Path) -> bytes | None:
    """The Home's signing key as its file holds it now; None when it has none."""
    try:
        key = bytes.fromhex((home / KEY_FILE).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None
    if len(key) < _MIN_KEY_BYTES:
        return None
    # A host secret wherever it is read (TRUST-7), as host/grants.py does.
    register_host_secret(KEY_FILE, key.hex())
    register_host_secret(KEY_FILE, key.hex().upper())
    return key


def signers(homes: Iterable[Path], workspace: Path) -> list[Signer]:
    """What checks ``workspace``'s journals for each of ``homes`` that has a key."""
    place = resolved_workspace(workspace)
    out: list[Signer] = []
    seen: set[bytes] = set()
    for home in homes:
        key = _key(Path(home))
        if key is not None and key not in seen:
            seen.add(key)
            out.append(Signer(key, Path(home), place))
    return out


def is_signed(journal: Path, by: list[Signer]) -> bool:
    """True when one of ``by`` signed ``journal`` and it is still that Home's last save."""
    if journal.suffix != ".jsonl":
        return False  # an old-format document was never signed
    for signer in by:
        try:
            if summary_signed(journal, signer):
                return True
        except OSError:
            return False
    return False
