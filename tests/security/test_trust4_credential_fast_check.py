"""TRUST-4: the fast credential checks the listing tools use on every found file
(``is_credential_name``'s string tests, ``CredentialCheck``'s per-folder cache) refuse
exactly what the reference rules refuse: the glob regex of CREDENTIAL_FILES and the
whole-path check ``is_credential_parts``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from crystal_kernel.core.access import (
    _EXCEPTIONS,
    CREDENTIAL_DIRS,
    CREDENTIAL_EXCEPTIONS,
    CREDENTIAL_FILES,
    CREDENTIAL_SUFFIXES,
    CredentialCheck,
    _credential_name_pattern,
    is_credential_name,
    is_credential_parts,
)

# Names built from the globs themselves (each '*' filled), their near misses, and
# non-ASCII look-alikes that only the regex's Unicode case folding matches (ſ = s).
FILLERS = ["", "x", "prod", ".", "a.b", "ſ", "K", "é"]
SEEDS = sorted({g.replace("*", f) for g in CREDENTIAL_FILES for f in FILLERS} | set(CREDENTIAL_EXCEPTIONS)
               | {"app.py", "README.md", ".envx", "xenv", "id_rsa_old", "key", "pem", "client_secret.yaml",
                  "service-account", "ſecrets.yml", "ſervice-account.json", ".ſsh", "tokenſjson"})
names = st.one_of(st.sampled_from(SEEDS),
                  st.builds(lambda a, b, c: a + b + c, st.sampled_from(SEEDS), st.sampled_from(FILLERS),
                            st.sampled_from(SEEDS)),
                  st.text(max_size=12))
PARTS = sorted(CREDENTIAL_DIRS | {p for s in CREDENTIAL_SUFFIXES for p in s}
               | {"src", "pkg", "Config", ".GIT", "home", "a.py"} | set(SEEDS[:40]))


@settings(max_examples=3000, deadline=None)
@given(names)
def test_name_check_equals_the_glob_regex(name: str):
    low = name.lower()
    expected = low not in _EXCEPTIONS and _credential_name_pattern().match(low) is not None
    assert is_credential_name(low) == expected, name


def test_every_credential_glob_is_covered():
    for glob in CREDENTIAL_FILES:
        if "/" not in glob:
            assert is_credential_name(glob.replace("*", "zz").lower()), glob


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(PARTS), max_size=3), st.lists(st.sampled_from(PARTS), max_size=4),
       st.one_of(st.sampled_from(PARTS), names.filter(lambda n: n and "/" not in n)))
def test_listing_check_equals_the_whole_path_check(prefix: list[str], folders: list[str], name: str):
    rel = "/".join([*folders, name])
    check = CredentialCheck(tuple(prefix))
    expected = is_credential_parts(tuple(prefix) + tuple(rel.split("/")))
    assert check(rel) == expected, (prefix, rel)
    assert check(rel) == expected  # the folder's cached verdict gives the same answer


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(PARTS), max_size=3),
       st.lists(st.tuples(st.lists(st.sampled_from(PARTS), max_size=3),
                          st.one_of(st.sampled_from(PARTS), names.filter(lambda n: n and "/" not in n))),
                max_size=6))
def test_the_batch_filter_keeps_exactly_the_non_credentials(prefix: list[str], entries: list[tuple[list[str], str]]):
    # What glob keeps of a listing (its fast path for plain names; docs/benchmarks.md).
    rels = ["/".join([*folders, name]) for folders, name in entries]
    expected = [rel for rel in rels if not is_credential_parts(tuple(prefix) + tuple(rel.split("/")))]
    assert CredentialCheck(tuple(prefix)).keep(rels) == expected, (prefix, rels)
