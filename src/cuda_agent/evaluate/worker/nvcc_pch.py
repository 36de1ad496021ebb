"""A precompiled header for nvcc's final host compile of a CUDA unit (used by `nvcc_stages.py`).

nvcc's last step compiles cudafe++'s output (`X.cudafe1.cpp`) with the host compiler: the unit's
headers, preprocessed, then the unit's own code, then the stub and the fatbinary. For a unit that
includes torch's headers that is hundreds of thousands of lines, the same in every such unit up to
the unit's first line of its own, and parsing them is most of the step: with the headers precompiled
the step takes under a third of its time (docs/measured/2026-12-04-fresh-h200.md, "nvcc's final host
compile with a precompiled header"). So that text (the prefix: everything before the first line that
cudafe++ attributes to the unit's own source) is compiled once into a gcc precompiled header, kept
under `pch_dir/<key>/` where the key is a digest of the prefix, the compile's flags and the
compiler; the final compile then reads the header's parsed state and the unit's own code. A header
is built the second time its prefix is seen (a marker `<key>.seen` records the first), so that a set
of includes that one candidate alone uses costs no header.

The header's text is the prefix verbatim but for one name. cudafe++ spells each anonymous namespace
as a named one, `_GLOBAL__N__<module id>`, which differs from unit to unit, and the stub names
entities in it through that name (it registers device variables such as libcu++'s `ignore`). In the
header that name is `_GLOBAL__N__pch_<key>`, and the unit's own part starts with a namespace alias
from the unit's name to it in each scope where the prefix had one. The entities of the headers'
anonymous namespaces then have the same (hidden) name in every unit built with this header, so two
such units in one shared library would share them: only a unit that is its build's only CUDA unit
uses a header (`light_nvcc.py` checks the ninja file).

A precompiled header is only ever an optimisation of nvcc's own step. The compile with it counts
only when it succeeds without a word of output; otherwise (a header gcc will not use, an error, a
warning that nvcc's own compile might not give) the final compile runs exactly as nvcc plans it, and
that is what the build sees. A prefix whose pragmas could leave state behind that a precompiled
header might not carry over (anything but gcc's diagnostics and visibility pushed and popped back)
gets none. Where no header is ready for a prefix seen before, one is built beside nvcc's own final
compile (published atomically, under a lock that no other build waits for) and waited for before
returning, so that nothing of it runs once the build is done.

Standard library only: it runs inside `light_nvcc.py`, before anything else of the package loads.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HEADER = "prefix.h"
MIN_PREFIX_BYTES = 4 << 20  # below this the header's loading costs about what it saves
KEEP = 8  # headers kept (each a few hundred MB), the least recently used removed first: the corpus's
# CUDA sources make a few distinct prefixes with one light header, a handful of them nearly every unit;
# with the tensor header on (light_nvcc.py) units compile with it or with torch/types.h, so both sets
# of prefixes recur and KEEP holds both (the counts: docs/measured/2026-12-04-fresh-h200.md, "nvcc's
# final host compile with a precompiled header"; the sizes and the share of each header:
# docs/measured/2026-12-07-figures-from-the-code.md)
SEEN_KEPT = 256  # markers of prefixes seen once
BUILD_TIMEOUT_S = 300.0
FAILED_WAIT_S = 3600.0  # a header whose build failed is not tried again for this long
FIRST_LINE = re.compile(rb'# 1 "((?:[^"\\]|\\.)*)"[ \d]*\n')
ANON = re.compile(rb"_GLOBAL__N__\w+")
PRAGMA = re.compile(rb"^[ \t]*#[ \t]*pragma[ \t]+([^\n]*)", re.M)
# cudafe++'s spelling of `namespace {` (its first opening in a scope, then each later one)
DECLARE = rb'namespace %s __attribute__\(\(visibility\("hidden"\)\)\)  \{ \}; using namespace ((?:::\w+)*)::%s; '
REOPEN = rb'namespace %s __attribute__((visibility("hidden")))  {'


@dataclass
class Split:
    key: str
    header_text: bytes  # the prefix, the anonymous namespaces under the header's own name
    rest: bytes  # what the final compile reads after the header: the unit's first line, the aliases, its own part


def is_gcc(program: str, env: dict[str, str]) -> bool:
    """Whether the host compiler is gcc (whose precompiled headers this makes; clang's differ)."""
    try:
        first = subprocess.run([program, "--version"], env=env, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "clang" not in first.partition("\n")[0].lower() and "Free Software Foundation" in first


def _compiler_identity(program: str, env: dict[str, str]) -> list:
    found = shutil.which(program, path=env.get("PATH"))
    if found is None:
        return [program]
    st = os.stat(found)
    return [os.path.realpath(found), st.st_size, st.st_mtime_ns]


def _pragmas_end_where_they_began(prefix: bytes) -> bool:
    """Whether the prefix's pragmas leave no state that a precompiled header might not carry over
    to the unit's own part: only gcc's diagnostics (which can change warnings only, and a compile
    with a warning is not used) and visibility pushed and popped back."""
    depth = 0
    for m in PRAGMA.finditer(prefix):
        words = m.group(1).split()
        if words[:2] == [b"GCC", b"diagnostic"]:
            continue
        if words[:2] != [b"GCC", b"visibility"]:
            return False
        what = b"".join(words[2:])
        if what.startswith(b"push("):
            depth += 1
        elif what == b"pop":
            depth -= 1
        else:
            return False
    return depth == 0


def split(text: bytes, argv: list[str], source: str, env: dict[str, str],
          min_prefix: int | None = None) -> Split | None:
    """cudafe++'s output `text`, compiled by `argv` (the final step, input `source`), cut into the
    header's text and the rest; None where it is not of the shape known here (its pragmas among it),
    or too small to gain."""
    first = FIRST_LINE.match(text)
    if first is None:
        return None
    unit = first.group(1)
    own = re.compile(rb'^# \d+ "' + re.escape(unit) + rb'"[ \d]*$', re.M).search(text, first.end())
    if own is None or own.start() - first.end() < (MIN_PREFIX_BYTES if min_prefix is None else min_prefix):
        return None
    prefix = text[first.end():own.start()]
    if not _pragmas_end_where_they_began(prefix):
        return None
    names = set(ANON.findall(prefix))
    if len(names) > 1:
        return None
    flags = [a for a in argv[1:] if a != source]
    if "-o" in flags:
        at = flags.index("-o")
        del flags[at:at + 2]
    digest = hashlib.sha256(json.dumps([_compiler_identity(argv[0], env), flags]).encode())
    if not names:
        digest.update(prefix)
        return Split(digest.hexdigest()[:32], prefix, text[:first.end()] + text[own.start():])
    name = names.pop()
    declare = re.compile(DECLARE % (re.escape(name), re.escape(name)))
    declared = declare.findall(prefix)
    # each opening names it once, a first one once more in its using-directive
    if not declared or prefix.count(name) != prefix.count(REOPEN % name) + len(declared):
        return None  # the name is used some other way: not known here
    digest.update(prefix.replace(name, b"@"))
    key = digest.hexdigest()[:32]
    fixed = b"_GLOBAL__N__pch_" + key[:16].encode()
    aliases = b""
    for scope in sorted(set(declared)):
        parts = [p for p in scope.split(b"::") if p]
        aliases += (b"".join(b"namespace %s { " % p for p in parts) + b"namespace %s = %s::%s; " % (name, scope, fixed)
                    + b"}" * len(parts) + b"\n")
    return Split(key, prefix.replace(name, fixed), text[:first.end()] + aliases + text[own.start():])


def header_command(argv: list[str], source: str, header: Path) -> list[str]:
    """The final compile's command, of the header instead of the unit."""
    words, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != source:
            words.append(a)
    return [*words, "-x", "c++-header", str(header), "-o", f"{header}.gch"]


def with_header(argv: list[str], source: str, rest: Path, header: Path) -> list[str]:
    """The final compile's command, reading `rest` after the precompiled `header`; the unit's
    stub and fatbinary are still found beside cudafe++'s output."""
    words = [str(rest) if a == source else a for a in argv]
    return [words[0], "-include", str(header), "-Winvalid-pch", "-iquote", os.path.dirname(os.path.abspath(source)),
            *words[1:]]


def prune(root: Path, keep: int = KEEP) -> None:
    """Remove all but the `keep` most recently used headers under `root` (folders being built,
    named with a leading dot, are not headers)."""
    ready = sorted((d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")),
                   key=lambda d: d.stat().st_mtime, reverse=True)
    for old in ready[keep:]:
        shutil.rmtree(old, ignore_errors=True)
        for marker in (f"{old.name}.lock", f"{old.name}.seen", f"{old.name}.failed"):  # a pruned header waits for two sightings again
            with contextlib.suppress(OSError):
                os.remove(root / marker)
    seen = sorted(root.glob("*.seen"), key=lambda f: f.stat().st_mtime, reverse=True)
    for old in seen[SEEN_KEPT:]:
        with contextlib.suppress(OSError):
            old.unlink()


class Building:
    """A precompiled header being built in the background: `root/key/name.gch` from `text`, by
    `command(header path)`, unless another process is on it (then nothing is started). `finish`
    waits for it and publishes it whole (one rename), keeping the `keep` most recently used. A build
    that failed leaves `root/key.failed`, and none is tried again for FAILED_WAIT_S."""

    def __init__(self, root: Path, key: str, name: str, text: bytes, command, env: dict[str, str] | None = None,
                 keep: int = KEEP):
        self.root, self.key, self.name, self.keep, self.proc = root, key, name, keep, None
        root.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            if time.time() - (root / f"{key}.failed").stat().st_mtime < FAILED_WAIT_S:
                return
        self.lock = open(root / f"{key}.lock", "w")
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.lock.close()  # another build is making it
            return
        self.work = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
        header = self.work / name
        header.write_bytes(text)
        self.proc = subprocess.Popen(command(header), env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)

    def finish(self) -> bool:
        """Wait for the header; publish it where it built. Whether this call published one."""
        if self.proc is None:
            return False
        try:
            ok = self.proc.wait(BUILD_TIMEOUT_S) == 0
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            ok = False
        published = False
        if ok and (self.work / f"{self.name}.gch").is_file():
            with contextlib.suppress(OSError):
                os.chmod(self.work, 0o755)  # (mkdtemp's 0700) a sandboxed candidate, as another user, reads it
                self.work.rename(self.root / self.key)  # atomic: the folder appears whole or not at all
                published = True
                prune(self.root, self.keep)
        shutil.rmtree(self.work, ignore_errors=True)
        if not published:
            with contextlib.suppress(OSError):
                (self.root / f"{self.key}.failed").touch()
        self.lock.close()
        return published


REQUESTS = "CUDA_AGENT_PCH_REQUESTS"  # where a sandboxed build leaves its requests for headers


def ask(s: Split, argv: list[str], source: str, text_of: str) -> None:
    """In a sandboxed build, whose header folder is read-only: leave the harness what it needs to
    build this prefix's header itself (the final compile's command and cudafe++'s output, from
    which it derives the key and the header's text again)."""
    folder = os.environ.get(REQUESTS)
    if not folder or (Path(folder) / f"{s.key}.json").exists():
        return
    with contextlib.suppress(OSError):
        os.makedirs(folder, exist_ok=True)
        shutil.copyfile(text_of, Path(folder) / f"{s.key}.cpp")
        (Path(folder) / f"{s.key}.json").write_text(json.dumps({"argv": argv, "source": source}))


@dataclass
class Attempt:
    argv: list[str] | None = None  # the compile with a ready header (None: none ready)
    building: Building | None = None


def prepare(root: str, argv: list[str], source: str, work: str, env: dict[str, str]) -> Attempt:
    """What to do for the final compile `argv` of cudafe++'s output `source`: compile with a
    ready header (its rest written under `work`), build the header beside nvcc's own where its
    prefix was seen before, or nothing (the first sighting is recorded)."""
    try:
        if not is_gcc(argv[0], env):
            return Attempt()
        with open(source, "rb") as f:
            s = split(f.read(), argv, source, env)
        if s is None:
            return Attempt()
        ready = Path(root) / s.key
        if (ready / f"{HEADER}.gch").is_file():
            with contextlib.suppress(OSError):  # (read-only in a sandboxed build)
                os.utime(ready)  # recently used: kept by `prune`
            rest = Path(work) / "pch" / os.path.basename(source)  # the same name: gcc names the unit's initialiser after it
            rest.parent.mkdir(parents=True, exist_ok=True)
            rest.write_bytes(s.rest)
            return Attempt(argv=with_header(argv, source, rest, ready / HEADER))
        if os.environ.get(REQUESTS):  # a sandboxed build: the harness builds headers (evaluate/isolate.py)
            ask(s, argv, source, text_of=source)
            return Attempt()
        seen = Path(root) / f"{s.key}.seen"
        if not seen.exists():  # the first unit with these headers: no header yet
            seen.parent.mkdir(parents=True, exist_ok=True)
            seen.touch()
            return Attempt()
        return Attempt(building=Building(Path(root), s.key, HEADER, s.header_text + b"\n",
                                         lambda header: header_command(argv, source, header), env))
    except OSError:
        return Attempt()
