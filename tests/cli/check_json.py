#!/usr/bin/env python3
"""Runs `tgsched ARGS...` and checks its --json contract (docs/json.md): stdout is
exactly one JSON document, its exit_code and status agree with the process's
exit status, and each PATH=VALUE given before `--` holds.

usage: check_json.py TGSCHED [PATH=VALUE | PATH? ...] -- ARGS...
  PATH   dotted keys and list indices, e.g. buffers.0.tensors.0.offset
  =V     the value, compared as JSON (=2, ="cpu", =true); PATH? only requires it
Prints "1 passed, 0 failed" or the reason and exits 1."""
import json
import subprocess
import sys

STATUS = {0: "ok", 1: "failed", 2: "bad_input", 3: "resource"}


def lookup(doc, path):
    for key in path.split("."):
        if isinstance(doc, list):
            doc = doc[int(key)]
        else:
            doc = doc[key]
    return doc


def main():
    exe = sys.argv[1]
    sep = sys.argv.index("--")
    checks, args = sys.argv[2:sep], sys.argv[sep + 1:]
    proc = subprocess.run([exe] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        doc = json.loads(proc.stdout)  # rejects a second document ("Extra data") and an empty stdout
    except json.JSONDecodeError as e:
        sys.exit(f"stdout is not one JSON document ({e}):\n{proc.stdout[:2000]}\n0 passed, 1 failed")
    problems = []
    if doc.get("tgsched") != 1:
        problems.append(f"tgsched = {doc.get('tgsched')!r}, want 1")
    if doc.get("exit_code") != proc.returncode:
        problems.append(f"exit_code {doc.get('exit_code')!r} but the process exited {proc.returncode}")
    if doc.get("status") != STATUS.get(proc.returncode):
        problems.append(f"status {doc.get('status')!r} for exit {proc.returncode}")
    if proc.returncode >= 2 and not isinstance(doc.get("error"), str):
        problems.append("a failed call has no error message")
    for check in checks:
        path, _, want = check.partition("=")
        try:
            got = lookup(doc, path.rstrip("?"))
        except (KeyError, IndexError, ValueError, TypeError):
            problems.append(f"{path.rstrip('?')} is missing")
            continue
        if not path.endswith("?") and got != json.loads(want):
            problems.append(f"{path} = {got!r}, want {want}")
    if problems:
        sys.exit("\n".join(problems) + f"\nstderr: {proc.stderr[-1000:]}\n0 passed, 1 failed")
    print("1 passed, 0 failed")


main()
