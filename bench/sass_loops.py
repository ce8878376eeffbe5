#!/usr/bin/env python3
"""Instruction mix of the loops that issue wgmma (HGMMA) in a SASS listing (`cuobjdump -sass`).

    cuobjdump -sass build/splitkv | python3 bench/sass_loops.py - [REGEX]

For each function whose mangled name matches REGEX: its instruction count, then every loop (a
backward branch and the code from its target to it) that contains an HGMMA, with its length and
its most frequent opcodes. Branches inside a loop are counted whether or not they are taken, so a
loop's length is an upper bound on the instructions one iteration executes. Used to compare a
kernel's steady loop with a peer's (lab/NOTES.md, run 57: 16 R2UR per step in prefill_sm90's loop
moving the Q operand's descriptors into uniform registers, none in the CUTLASS example's)."""
import collections
import re
import sys


def functions(stream):
    name, out = None, {}
    for line in stream:
        m = re.search(r"Function : (\S+)", line)
        if m:
            name = m.group(1)
            out[name] = []
        elif name is not None:
            m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
            if m:
                text = m.group(2).strip()
                opcode = re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]
                out[name].append((int(m.group(1), 16), text, opcode))
    return out


def hgmma_loops(instructions):
    index = {address: i for i, (address, _, _) in enumerate(instructions)}
    for i, (address, text, opcode) in enumerate(instructions):
        m = re.search(r"\bBRA(?:\.\w+)*\s+(0x[0-9a-f]+)", text) if opcode == "BRA" else None
        if m and int(m.group(1), 16) <= address and int(m.group(1), 16) in index:
            body = instructions[index[int(m.group(1), 16)]:i + 1]
            mix = collections.Counter(op for _, _, op in body)
            if mix["HGMMA"]:
                yield body[0][0], address, len(body), mix


def main():
    stream = sys.stdin if len(sys.argv) < 2 or sys.argv[1] == "-" else open(sys.argv[1])
    pattern = re.compile(sys.argv[2] if len(sys.argv) > 2 else ".")
    for name, instructions in functions(stream).items():
        if not pattern.search(name):
            continue
        print(f"{name}\n  {len(instructions)} instructions")
        for start, end, length, mix in hgmma_loops(instructions):
            top = ", ".join(f"{op} {n}" for op, n in mix.most_common(18))
            print(f"  loop {start:#x}-{end:#x}: {length} instructions: {top}")


if __name__ == "__main__":
    main()
