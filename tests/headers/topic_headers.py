#!/usr/bin/env python3
"""Device API layout check (docs/design.md, "Topic headers declare, impl/ defines").

Usage: topic_headers.py <include/gdaki/device> [source root]...

1. A topic header (include/gdaki/device/*.hpp, not impl/) holds types, constants and
   declarations: no function body's `}` is more than MAX_SPAN lines below its `{`, so
   one-line accessors and one-statement forwarders may stay, nothing longer.
   A function body is a `{` whose previous token is `)`, `const` or `noexcept` (a
   function, constructor or member function), found outside comments and literals; the
   matching `}` is found by counting braces.
2. Every impl/*.hpp is included by exactly one topic header, which is the one of the same
   name, and says that it is not to be included directly.
3. Nothing outside include/gdaki/device includes an impl/ header (searched under each
   source root given after the first argument).

Exits 1 with one line per finding.
"""
import pathlib
import re
import sys

MAX_SPAN = 2  # `{ ... }` on one line, or `{`, one statement, `}` on three

# Headers that are not split into a topic header and impl/ (each with its reason).
EXEMPT = {
    # The primitives header: every primitive is a CUDA half and a host half chosen by
    # #if, and both halves are its definition; splitting it would only duplicate the #if.
    "arch.hpp",
    # Host-only helpers (never compiled as device code): the CPU launcher emulating
    # warps and blocks, and the per-thread context it installs.
    "host_grid.hpp",
    "host_context.hpp",
}

INCLUDE_IMPL = re.compile(r'^\s*#\s*include\s+[<"]gdaki/device/impl/([A-Za-z0-9_]+\.hpp)[>"]', re.M)
NOT_DIRECTLY = re.compile(r"not to be included directly", re.I)


def strip(text):
    """Comments and string/char literals replaced by spaces; newlines kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i))
            i = j + 1
        elif c == "#":  # preprocessor line (with continuations): not code
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0:
                    k = n
                    break
                if text[k - 1] != "\\":
                    break
                j = k + 1
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:k]))
            i = k
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_bodies(path):
    code = strip(path.read_text())
    found = []
    i, n = 0, len(code)
    while i < n:
        if code[i] != "{":
            i += 1
            continue
        before = code[:i].rstrip()
        opens_body = before.endswith(")") or re.search(r"\b(const|noexcept)$", before)
        if not opens_body:
            i += 1
            continue
        depth, j = 0, i
        while j < n:
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        first = code.count("\n", 0, i) + 1
        last = code.count("\n", 0, j) + 1
        if last - first > MAX_SPAN:
            found.append((first, last))
        i = j + 1  # bodies nested in this one are part of it
    return found


def main():
    device = pathlib.Path(sys.argv[1])
    impl = device / "impl"
    bad = []
    includers = {}
    for h in sorted(device.glob("*.hpp")):
        text = h.read_text()
        for name in INCLUDE_IMPL.findall(text):
            includers.setdefault(name, []).append(h.name)
        if h.name in EXEMPT:
            continue
        for first, last in long_bodies(h):
            bad.append(f"{h}:{first}: function body of {last - first + 1} lines in a topic header "
                       f"(at most {MAX_SPAN + 1}): move the definition to impl/{h.name}")
    for f in sorted(impl.glob("*.hpp")) if impl.is_dir() else []:
        who = includers.get(f.name, [])
        if who != [f.name]:
            bad.append(f"{f}: included by {who or 'no topic header'}; must be included by exactly one: {f.name}")
        if not NOT_DIRECTLY.search(f.read_text()):
            bad.append(f"{f}: lacks the comment saying it is not to be included directly")
    for name in includers:
        if not (impl / name).is_file():
            bad.append(f"{device}: includes impl/{name}, which does not exist")
    for root in sys.argv[2:]:
        for p in sorted(pathlib.Path(root).rglob("*")):
            if p.suffix not in (".hpp", ".cpp", ".cu", ".cuh", ".h", ".md") or not p.is_file():
                continue
            if device in p.parents:
                continue
            for name in INCLUDE_IMPL.findall(p.read_text(errors="replace")):
                bad.append(f"{p}: includes gdaki/device/impl/{name}; include the topic header {name} instead")
    for line in bad:
        print(line)
    if bad:
        print(f"FAIL: {len(bad)} finding(s); see docs/design.md (topic headers declare, impl/ defines)")
        return 1
    print("ok: topic headers declare, impl/ defines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
