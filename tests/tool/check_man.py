#!/usr/bin/env python3
"""Checks docs/man/gdaki.1 against the built tool, so the page cannot silently go stale.

Usage:
  check_man.py render  PAGE          groff renders the page with every warning on, silently
  check_man.py covers  PAGE GDAKI    every subcommand `gdaki --help` lists has its own
                                     subsection, and every option (long and short) and every
                                     listed choice its --help prints appears in that subsection
  check_man.py install PAGE BUILD SCRATCH
                                     `cmake --install BUILD --prefix SCRATCH` puts the page at
                                     share/man/man1/gdaki.1, byte for byte
Exit status: 0 pass, 1 fail, 77 skip (groff missing).
"""
import filecmp
import os
import re
import shutil
import subprocess
import sys


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def render(page):
    if shutil.which("groff") is None:
        print("SKIP: groff not installed (groff-base, scripts/install-deps.sh)")
        sys.exit(77)
    # -ww: all warnings; -z: format but discard the output. man(1) shows nothing of these
    # warnings to a reader, so only this test sees a broken macro or escape.
    r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", page], capture_output=True, text=True)
    if r.returncode != 0 or r.stderr:
        fail(f"groff exit status {r.returncode}, warnings:\n{r.stderr}")
    print("PASS: the page renders without warnings")


def help_text(gdaki, *args):
    r = subprocess.run([gdaki, *args, "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"`gdaki {' '.join(args)} --help` exited with {r.returncode}")
    return r.stdout


def plain(text):
    """troff source with the escapes the page uses undone, so options read as typed."""
    text = re.sub(r"\\f[BIRP]", "", text)   # font changes
    text = text.replace("\\-", "-").replace("\\&", "")
    # Macro arguments are quoted and space-separated (.BR \-a ", " \-\-all): keep words.
    return text.replace('"', " ")


def page_sections(page):
    """The whole page ("") and each `.SS "gdaki SUB"` subsection (SUB), as plain text."""
    sections, current = {"": ""}, None
    with open(page, encoding="utf-8") as f:
        for line in f:
            sections[""] += line
            m = re.match(r'\.SS\s+"?gdaki (\S+?)"?\s*$', line)
            if m:
                current = m.group(1)
                sections[current] = ""
                continue
            if line.startswith(".SH"):
                current = None
            if current is not None:
                sections[current] += line
    return {name: plain(text) for name, text in sections.items()}


def mentions(text, word):
    return re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text) is not None


def covers(page, gdaki):
    top = help_text(gdaki)
    subs = re.findall(r"^  ([a-z][a-z0-9-]*)\s", top.split("Subcommands:", 1)[1], re.M) if "Subcommands:" in top else []
    if not subs:
        fail("`gdaki --help` lists no subcommands (its format changed?)")
    sections = page_sections(page)
    missing = []
    for flag in re.findall(r"--[a-z][a-z0-9-]*", top.split("Subcommands:", 1)[0]):
        if not mentions(sections[""], flag):
            missing.append(f"gdaki {flag} (SYNOPSIS)")
    checked = 0
    for sub in subs:
        if sub not in sections:
            missing.append(f"subsection .SS \"gdaki {sub}\"")
            continue
        text = sections[sub]
        helptext = help_text(gdaki, sub)
        # Option lines: "  -s,--size TEXT" / "  --json"; positionals' choices: "TEXT:{a,b}".
        words = set()
        for m in re.finditer(r"^  ((?:-[A-Za-z],)?--[a-z][a-z0-9-]*)", helptext, re.M):
            words.update(m.group(1).split(","))
        for m in re.finditer(r"TEXT:\{([^}]*)\}", helptext):
            words.update(m.group(1).split(","))
        # CLI11 prints an enum's names as "ENUM:value in {block->2,thread->0,warp->1}".
        words.update(re.findall(r"[{,]([a-z_]+)->\d", helptext))
        words.discard("-h")
        words.discard("--help")  # said once for all subcommands in DESCRIPTION
        for w in sorted(words):
            checked += 1
            if not mentions(text, w):
                missing.append(f"gdaki {sub}: {w}")
    if missing:
        fail("the man page lacks what --help prints:\n  " + "\n  ".join(missing))
    print(f"PASS: {len(subs)} subcommands ({', '.join(subs)}), {checked} options and choices, all in the page")


def install(page, build, scratch):
    shutil.rmtree(scratch, ignore_errors=True)
    r = subprocess.run(["cmake", "--install", build, "--prefix", scratch], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"cmake --install failed:\n{r.stdout}{r.stderr}")
    installed = os.path.join(scratch, "share", "man", "man1", "gdaki.1")
    if not os.path.isfile(installed):
        fail(f"cmake --install put no share/man/man1/gdaki.1 under the prefix:\n{r.stdout}")
    if not filecmp.cmp(page, installed, shallow=False):
        fail("the installed gdaki.1 differs from docs/man/gdaki.1")
    shutil.rmtree(scratch, ignore_errors=True)
    print("PASS: cmake --install puts the page at share/man/man1/gdaki.1")


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    {"render": render, "covers": covers, "install": install}[mode](*args)
