#!/usr/bin/env python3
"""The house rules, checked on every CI run (docs/ARCHITECTURE.md, "Layers").

1. Includes run down the layers, never back up: a file under src/<folder> includes "<other>/..."
   only when <other> sits at the same layer or below (the table LAYERS).
2. Host code never includes device code: no .cpp/.hpp outside the device folders includes a .cuh
   file, CuTe or CUTLASS.
3. The public headers include only the standard library, other public headers and (the dist API)
   NCCL.
4. Nothing in the library, its tests, tools, build files or docs cites the lab notebook (lab/):
   the notebook is history; the current evidence lives in docs/TUNING.md.
5. The library's sources (src/, include/, python/, cmake/) hold no measurements: no run numbers
   ("run 34") and no microsecond figures ("~5 us"); they say what a rule is and point to
   docs/TUNING.md, which holds its evidence.

Prints every offending line as path:line: text (rule) and exits 1 if there is one.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Lower numbers are lower layers. A folder may include its own layer and those below it.
LAYERS = {
    "splitkv": 0,          # include/splitkv: the public API
    "common": 1,           # element formats, host/device qualifiers, host element access, status, utilities
    "kernels/common": 2,   # device-agnostic helpers shared with the host (causal rule, split rule)
    "kernels/launch": 2,   # how any kernel is launched: launch config (a seam), launch_kernel, attributes
    "kernels": 3,          # one folder per family: tile, kernel parts, params, launcher, instance template;
                           # tile_table.hpp: every family's tile summaries, for the planner
    "quant": 4,            # host quantizer and row readers (the formats' definitions)
    "reference": 4,        # the fp64 reference
    "registry": 5,         # the kernel-family registry
    "validate": 5,         # argument validation
    "plan": 6,             # the planner
    "launch": 7,           # dispatch (registry instance -> launcher) and the aux launchers' declarations
    "cpu": 8,              # the CPU backend
    "api": 9,              # entry points
    "dist": 10,            # context-parallel decode over NCCL
    "testing": 11,         # test support
}
DEVICE_FOLDERS = {"kernels", "kernels/common", "kernels/launch", "launch"}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')
LAB_CITATION = re.compile(r"(\blab/|bench/NOTES\.md|results/runs/)")
CITATION_TREES = ["src", "include", "tests", "python", "tools", "cmake", "docs"]
SOURCE_SUFFIXES = {".cpp", ".hpp", ".cu", ".cuh", ".h", ".in"}
MEASUREMENT = re.compile(r"\b[Rr]uns? \d{1,3}\b|\b\d+(\.\d+)? ?(µs|us)\b")
MEASUREMENT_TREES = ["src", "include", "python", "cmake"]
MEASUREMENT_SUFFIXES = SOURCE_SUFFIXES | {".py", ".cmake", ".txt"}


def layer_of(relative):
    """The LAYERS key of a path relative to src/ (or of an include path), or None."""
    parts = pathlib.PurePosixPath(relative).parts
    if relative in LAYERS:
        return relative
    if len(parts) >= 2 and f"{parts[0]}/{parts[1]}" in LAYERS:
        return f"{parts[0]}/{parts[1]}"
    return parts[0] if parts and parts[0] in LAYERS else None


def check_includes(problems):
    for path in sorted((ROOT / "src").rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        rel = path.relative_to(ROOT / "src").as_posix()
        own = layer_of(rel)
        if own is None:
            problems.append(f"src/{rel}:1: folder not in scripts/check_layout.py LAYERS (rule 1)")
            continue
        host_file = own not in DEVICE_FOLDERS and path.suffix in {".cpp", ".hpp", ".h"}
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(2)
            where = f"src/{rel}:{number}: {line.strip()}"
            if host_file and (target.endswith(".cuh") or target.startswith(("cute/", "cutlass/"))):
                problems.append(f"{where} (rule 2: host code includes device code)")
            if m.group(1) != '"':
                continue
            other = layer_of(target)
            if other is not None and LAYERS[other] > LAYERS[own]:
                problems.append(f"{where} (rule 1: {own} at layer {LAYERS[own]} includes {other} at layer "
                                f"{LAYERS[other]})")


def check_public_headers(problems):
    for path in sorted((ROOT / "include" / "splitkv").glob("*.hpp")):
        rel = path.relative_to(ROOT).as_posix()
        for number, line in enumerate(path.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(2)
            allowed = (m.group(1) == '"' and target.startswith("splitkv/")) or (
                m.group(1) == "<" and ("/" not in target and "." not in target or target == "nccl.h"))
            if not allowed:
                problems.append(f"{rel}:{number}: {line.strip()} (rule 3: public headers include only the "
                                f"standard library, splitkv/ and nccl.h)")


def check_lines(problems, trees, pattern, rule, suffixes=None):
    """Every line of the files under `trees` (those with one of `suffixes`, or any text file) that
    matches `pattern`, reported with `rule`."""
    for tree in trees:
        for path in sorted((ROOT / tree).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts or (suffixes and path.suffix not in suffixes):
                continue
            try:  # sources are read whatever their bytes; other files (images) only as text
                text = path.read_text(errors="replace") if suffixes else path.read_text()
            except (UnicodeDecodeError, OSError):
                continue
            rel = path.relative_to(ROOT).as_posix()
            for number, line in enumerate(text.splitlines(), 1):
                if pattern.search(line):
                    problems.append(f"{rel}:{number}: {line.strip()} ({rule})")


def check_lab_citations(problems):
    check_lines(problems, CITATION_TREES, LAB_CITATION, "rule 4: cites the lab notebook")


def check_measurements(problems):
    check_lines(problems, MEASUREMENT_TREES, MEASUREMENT,
                "rule 5: a measurement in the sources; docs/TUNING.md holds the evidence", MEASUREMENT_SUFFIXES)


def main():
    problems = []
    check_includes(problems)
    check_public_headers(problems)
    check_lab_citations(problems)
    check_measurements(problems)
    for p in problems:
        print(p)
    if problems:
        print(f"check_layout: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("check_layout: includes run down the layers, no device code in host files, public headers "
          "clean, no lab citations, no measurements in the sources")
    return 0


if __name__ == "__main__":
    sys.exit(main())
