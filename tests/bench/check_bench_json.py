#!/usr/bin/env python3
"""Runs one benchmark with --json and validates its output against docs/bench-schema.json.

Usage: check_bench_json.py SCHEMA COMMAND [ARGS...]
COMMAND is a program in bench/ or the gdaki tool followed by `bench` (--json and
--no-progress are appended). Exits 77 (ctest: skipped) when the benchmark exits 77
(it cannot run here: no root, no MPI) or does not exist. Validates with python3-jsonschema
where installed, else checks the schema's required keys and types by hand (check_by_hand).
"""
import json
import os
import subprocess
import sys


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def check_by_hand(doc):
    """The schema's required fields, without jsonschema: envelope, config, runs, rows."""
    for k in ("tool", "command", "version", "host", "config", "units", "runs"):
        if k not in doc:
            fail(f"missing top-level '{k}'")
    if doc["tool"] != "gdaki" or not isinstance(doc["command"], str):
        fail("tool must be 'gdaki' and command a string")
    if not isinstance(doc["runs"], list) or not doc["runs"]:
        fail("runs must be a non-empty array")
    for run in doc["runs"]:
        for k in ("test", "title", "kind", "results"):
            if k not in run:
                fail(f"run without '{k}'")
        if not run["results"]:
            fail(f"run {run['test']} has no results")
        if doc["command"] == "bench":
            for row in run["results"]:
                need = ("t_typical_us",) if run["kind"] == "latency" else ("bw_avg_mbps", "msg_rate_mpps")
                for k in ("bytes", "iterations", "messages") + need:
                    if not isinstance(row.get(k), (int, float)):
                        fail(f"{run['test']} row without numeric '{k}'")
        elif run["kind"] != "figures" or "runs" not in doc["config"]:
            fail("a bench/ program's run has kind 'figures' and its config says 'runs'")


def check_figures(doc):
    """What the schema cannot say: every bench/ program row holds at least one figure."""
    if doc["command"] == "bench":
        return
    for run in doc["runs"]:
        for row in run["results"]:
            if not any(isinstance(v, dict) for v in row.values()):
                fail(f"{run['test']}: row {row} holds no figure")


schema_path, *cmd = sys.argv[1:]
if not os.path.exists(cmd[0]):
    print(f"SKIP: {cmd[0]} is not built")
    sys.exit(77)
with open(schema_path) as f:
    schema = json.load(f)
proc = subprocess.run([*cmd, "--json", "--no-progress"], capture_output=True, text=True, timeout=300)
sys.stderr.write(proc.stderr)
if proc.returncode == 77:
    print(proc.stdout.strip() or "SKIP: the benchmark cannot run here")
    sys.exit(77)
if proc.returncode != 0:
    fail(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stdout[-2000:]}")
try:
    doc = json.loads(proc.stdout)
except json.JSONDecodeError as e:
    fail(f"not one JSON object ({e}): {proc.stdout[:500]}")
try:
    import jsonschema
except ImportError:
    jsonschema = None
if jsonschema is not None:
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=lambda e: list(e.path))
    for e in errors:
        print(f"FAIL: {'/'.join(map(str, e.path))}: {e.message}")
    if errors:
        sys.exit(1)
check_by_hand(doc)
check_figures(doc)
rows = sum(len(r["results"]) for r in doc["runs"])
how = "jsonschema" if jsonschema is not None else "required keys (no jsonschema module)"
print(f"PASS: {doc['command']}: {len(doc['runs'])} run(s), {rows} row(s) valid against {schema_path} ({how})")
