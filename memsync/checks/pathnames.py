"""The names no version of a memory may hold, decided once for both directions (docs/SECURITY.md).

A hub version holding one is refused before anything of it is written (git/hubtree.py); a file
at such a path is kept out of every commit and named (core/snapshot.py, the memory tool and the
MCP server through integrations/files.py). So an agent cannot push what every other sandbox's
clone would refuse, and a path libgit2 cannot store never blocks the rest of a commit:

- no name git or memsync treats as `.git` or `.vm0` on any file system: any letter case, the
  spellings NTFS and HFS+ read as the same name (`.vm0.`, `.vm0 `, `vm0~1`, `.vm0::$DATA`,
  `.v\u200cm0`), at any depth: `.vm0/` is the memory's local configuration (remote, policies);
- no `..`, `.`, empty name, name holding `/` or NUL.
"""

from __future__ import annotations

# Code points HFS+ ignores in names (git's next_hfs_char): `.g\u200cit` is `.git` on a Mac.
_HFS_IGNORED = frozenset([0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x206A, 0x2070),
                          0xFEFF])


def reserved_name(name: str) -> str | None:
    """`.git` or `.vm0` if `name` is one of them as git would see it on any file system
    (git's verify_path with core.protectNTFS and core.protectHFS); else None."""
    # every ignorable code point is outside ASCII: an ASCII name (the common case) folds at once,
    # and one that holds neither word is none of them
    if name.isascii():
        folded = name.lower()
        if "git" not in folded and "vm0" not in folded:
            return None
    else:
        folded = "".join(c for c in name if ord(c) not in _HFS_IGNORED).lower()
    for word in (".git", ".vm0"):
        for lead in (word, word[1:] + "~1"):  # `git~1`: the NTFS 8.3 short name of `.git`
            if folded.startswith(lead) and _only_dots_and_spaces(folded[len(lead):]):
                return word
    return None


def _only_dots_and_spaces(rest: str) -> bool:
    """NTFS drops trailing dots and spaces, and `:stream` names a stream of the same file."""
    head = rest.split(":", 1)[0]
    return head.strip(". ") == ""


def bad_name(name: str) -> bool:
    return name in ("", ".", "..") or "/" in name or "\0" in name or reserved_name(name) is not None


def bad_path(path: str) -> bool:
    """A path (`a/b/c`) holding any name a checkout must never write."""
    return any(bad_name(part) for part in path.split("/"))


def refused_path(path: str) -> str | None:
    """Why a file at `path` (relative, `/`-separated, as found in a work tree) is never
    committed; None if it may be. The one rule the commit side shares with the hub's trees."""
    for part in path.split("/"):
        word = reserved_name(part)
        if word == ".vm0":
            return f"{part!r} is or reads as .vm0 (memsync's local configuration); no version may hold it"
        if word is not None:
            return f"{part!r} is or reads as .git on some file system; no version may hold it"

        if part in ("", ".", "..") or "\0" in part:
            return f"{part!r} is not a name git stores"
    return None


__all__ = ["bad_name", "bad_path", "refused_path", "reserved_name"]
