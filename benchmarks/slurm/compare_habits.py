"""A switching user's habits (issue 57 items 1-11, issue 56 item 3) under Slurm and railyard.

Needs what ``compare_env.py`` needs: the one-node Slurm of ``setup_local_slurm.sh`` (8 fake
GPUs, partitions ``gpu`` and ``debug``, slurmdbd) and root. railyard runs from this checkout's
Python (run this file with the venv whose ``railyard`` is to be compared): a fresh ``railyard
up`` with the same node (8 H100, 16 CPUs) and partitions. Each case in ``habit_cases.py``
runs once on each system, the two systems side by side in two threads (so the same minutes),
the cases of one system one after another. A case's ``seen`` (what the user reads: output
files, exit codes, variables, squeue/sacct fields) is compared: identical, a deliberate
difference (``DELIBERATE``, documented), open (``OPEN``: a known difference still to fix),
or differs. Prints a table, writes
``benchmarks/results/slurm_habits.json`` and, with ``--markdown FILE``, the docs' table.

    python benchmarks/slurm/compare_habits.py [--keep DIR] [--only 1,5,56.3]
"""

from __future__ import annotations

import argparse
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.slurm.compare_env import BIN, ROOT, Railyard, job_env, run_report
from benchmarks.slurm.habit_cases import CASES, DELIBERATE, OPEN
from benchmarks.slurm.habits import System

RESULTS = ROOT / "benchmarks" / "results" / "slurm_habits.json"


def run_side(system: System, names: list[str], work: Path, into: dict[str, Any]) -> None:
    """Every case on one system, in order; a case that raises is recorded, not fatal."""
    for name in names:
        out = work / system.name / name.split()[0]
        out.mkdir(parents=True)
        system.ids = []
        try:
            seen, detail = CASES[name](system, out)
        except Exception:
            seen, detail = {"error": traceback.format_exc().splitlines()[-1]}, {}
            system.cancel_all()
        into[name] = {"seen": seen, "detail": detail}


def verdict(name: str, slurm: dict[str, Any], railyard: dict[str, Any]) -> str:
    """identical; deliberate when every field that differs is one ``DELIBERATE`` explains;
    open when the rest are ``OPEN``'s (known, unfixed); else differs."""
    fields = {k for k in slurm.keys() | railyard.keys() if slurm.get(k) != railyard.get(k)}
    if not fields:
        return "identical"
    deliberate = DELIBERATE.get(name, {}).keys()
    if fields <= deliberate:
        return "deliberate"
    if fields <= deliberate | OPEN.get(name, {}).keys():
        return "open"
    return "differs"


def compare(work: Path, version: str, names: list[str]) -> dict[str, Any]:
    server = Railyard(work / "railyard-home", ("--cpus", "16", "--partition", "gpu Default=YES",
                                               "--partition", "debug"))  # fmt: skip
    report: dict[str, Any] = {"slurm": version, "railyard": server.cli("version").stdout.strip(),
                              "cases": {}}  # fmt: skip
    sides = {
        "slurm": System("slurm", job_env()),
        "railyard": System("railyard", dict(server.env), railyard=str(BIN / "railyard")),
    }
    found: dict[str, dict[str, Any]] = {"slurm": {}, "railyard": {}}
    try:
        threads = [threading.Thread(target=run_side, args=(sides[k], names, work, found[k]))
                   for k in sides]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        server.stop()
    for name in names:
        s, r = found["slurm"][name], found["railyard"][name]
        report["cases"][name] = {
            "slurm": s, "railyard": r, "verdict": verdict(name, s["seen"], r["seen"]),
            "why": "; ".join(f"{k}: {why}" for k, why in
                             {**DELIBERATE.get(name, {}), **OPEN.get(name, {})}.items()),
        }  # fmt: skip
    return report


def differing(case: dict[str, Any]) -> list[str]:
    s, r = case["slurm"]["seen"], case["railyard"]["seen"]
    return [k for k in sorted(s.keys() | r.keys()) if s.get(k) != r.get(k)]


def print_report(report: dict[str, Any]) -> None:
    print(f"{report['slurm']} vs railyard {report['railyard']}")
    print(f"{'case':34} {'verdict':11} differing fields")
    for name, case in report["cases"].items():
        print(f"{name:34} {case['verdict']:11} {', '.join(differing(case)) or '-'}")
    for name, case in report["cases"].items():
        for key in differing(case):
            print(f"  {name} / {key}:")
            print(f"    slurm:    {case['slurm']['seen'].get(key)!r}")
            print(f"    railyard: {case['railyard']['seen'].get(key)!r}")
        if case["why"]:
            print(f"  {name}: {case['verdict']}: {case['why']}")
        for system in ("slurm", "railyard"):
            if case[system]["detail"]:
                print(f"  {name} / {system} detail: {case[system]['detail']}")


def markdown(report: dict[str, Any]) -> str:
    """The docs' table: a case, what each system showed (in short), the verdict."""
    lines = ["| case | Slurm 22.05 | railyard | verdict |", "|---|---|---|---|"]
    for name, case in report["cases"].items():
        keys = differing(case) or sorted(case["slurm"]["seen"])[:2]
        cell = {k: "; ".join(f"{key}: {case[k]['seen'].get(key)!r}" for key in keys)
                for k in ("slurm", "railyard")}  # fmt: skip
        said = case["verdict"] + (f" ({case['why']})" if case["why"] else "")
        lines.append(f"| {name} | {_cell(cell['slurm'])} | {_cell(cell['railyard'])} | {said} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "\\n")[:300]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="keep the jobs' files in this directory")
    parser.add_argument("--only", help="these cases by number, comma-separated: 1,5,56.3")
    parser.add_argument("--markdown", type=Path, help="also write the docs' table here")
    args = parser.parse_args(argv)
    by_number = {name.split()[0]: name for name in CASES}
    wanted = args.only.split(",") if args.only else list(by_number)
    unknown = [n for n in wanted if n not in by_number]
    if unknown:
        print(f"--only: unknown case {unknown[0]!r} (hint: {', '.join(by_number)})",
              file=sys.stderr)  # fmt: skip
        return 2
    names = [by_number[n] for n in wanted]

    def show(report: dict[str, Any]) -> None:
        print_report(report)
        if args.markdown:
            args.markdown.write_text(markdown(report))

    return run_report(args.keep, RESULTS, lambda work, v: compare(work, v, names), show)


if __name__ == "__main__":
    raise SystemExit(main())
