#!/usr/bin/env python3
"""Code blocks of README.md and docs/*.md, checked like code.

  extract OUTDIR FILE...  writes each ```cpp block as OUTDIR/<doc>_<n>.cpp and each ```cuda
                          block as OUTDIR/<doc>_<n>.cu (the build compiles them), and
                          prints one "<lang> <path>" line per block written
  check FILE...           every fenced block names its language (a known one), and every
                          ```sh block parses (bash -n); exit 1 with the file and line of
                          each block that fails

Known languages: cpp and cuda (compiled by the build, tests/docs/CMakeLists.txt), sh
(parsed), cmake (read by CMake users, not run here), text (diagrams and program output).
"""
import os
import re
import subprocess
import sys

COMPILED = {"cpp": ".cpp", "cuda": ".cu"}
KNOWN = set(COMPILED) | {"sh", "cmake", "text"}


def blocks(path):
    """Yields (line, lang, body) for each fenced block of a Markdown file."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, lang = i + 1, m.group(1)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        if j == len(lines):
            raise SystemExit(f"{path}:{start}: code block never closed")
        yield start, lang, "\n".join(lines[i + 1:j]) + "\n"
        i = j + 1


def extract(outdir, files):
    os.makedirs(outdir, exist_ok=True)
    for path in files:
        doc = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
        for n, (line, lang, body) in enumerate(blocks(path)):
            if lang not in COMPILED:
                continue
            out = os.path.join(outdir, f"{doc}_{n}{COMPILED[lang]}")
            text = f'#line {line + 1} "{os.path.abspath(path)}"\n' + body
            # Rewrite only on change, so an unchanged block is not rebuilt.
            if not os.path.exists(out) or open(out, encoding="utf-8").read() != text:
                with open(out, "w", encoding="utf-8") as f:
                    f.write(text)
            print(lang, out)


def check(files):
    bad = []
    counted = {}
    for path in files:
        for line, lang, body in blocks(path):
            counted[lang] = counted.get(lang, 0) + 1
            if lang not in KNOWN:
                bad.append(f"{path}:{line}: code block language '{lang}' is not one of {sorted(KNOWN)}")
            elif lang == "sh":
                r = subprocess.run(["bash", "-n"], input=body, text=True, capture_output=True)
                if r.returncode != 0:
                    bad.append(f"{path}:{line}: sh block does not parse: {r.stderr.strip()}")
    print("doc blocks:", ", ".join(f"{k or '(none)'}={v}" for k, v in sorted(counted.items())))
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "extract":
        extract(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) >= 2 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2:]))
    else:
        sys.exit(__doc__)
