#!/usr/bin/env python3
"""Runs `gdaki bench ... --json` and validates the output against docs/bench-schema.json.

Usage: check_schema.py SCHEMA GDAKI [BENCH ARGS...]
Exits 77 (ctest: skipped) when python3-jsonschema is not installed.
"""
import json
import subprocess
import sys

try:
    import jsonschema
except ImportError:
    print("SKIP: python3-jsonschema is not installed (apt-get install python3-jsonschema)")
    sys.exit(77)

schema_path, gdaki, *args = sys.argv[1:]
with open(schema_path) as f:
    schema = json.load(f)
jsonschema.Draft202012Validator.check_schema(schema)
proc = subprocess.run([gdaki, "bench", *args, "--json", "--no-progress"], capture_output=True, text=True, timeout=300)
sys.stderr.write(proc.stderr)
if proc.returncode != 0:
    print(f"FAIL: gdaki bench exited {proc.returncode}")
    sys.exit(1)
doc = json.loads(proc.stdout)
errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=lambda e: list(e.path))
for e in errors:
    print(f"FAIL: {'/'.join(map(str, e.path))}: {e.message}")
if errors:
    sys.exit(1)
# The schema cannot say that every requested test ran: check it here.
wanted = [a for a in args if not a.startswith("-") and a in (
    "write_bw", "write_lat", "read_bw", "read_lat", "atomic_rate", "put_signal_bw", "send_lat", "send_bw")]
ran = [r["test"] for r in doc["runs"]]
if "all" in args and len(ran) != 8 or wanted and ran != wanted:
    print(f"FAIL: ran {ran}")
    sys.exit(1)
print(f"PASS: {len(doc['runs'])} run(s) valid against {schema_path}")
