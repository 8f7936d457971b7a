#!/usr/bin/env python3
"""Where a CUDA kernel's loops wait: per kernel of a cubin, its loops (backward branches) with their instruction
counts, their MUFU operations, how many instructions after each MUFU its result is first read, and the register
spills (LDL/STL) inside each loop.

A warp issues in order, so a MUFU result read a few instructions after its issue stalls the warp for the rest of
the unit's latency; the selective-scan forward gained 1.4% by moving that distance from 11 to 18 instructions
(docs/mamba_kernels.md, sixteenth round). A kernel at its register cap spills in a loop because of code elsewhere
in it: decode_stack's FP8 tile loop began to spill when another phase's staging took 40 more registers, and its
GEMM phases lost ~10% (docs/decode_kernels.md, fourteenth round). It reads `cuobjdump -sass` output, so it needs
no GPU.

  tools/sass_loops.py KERNELS.cubin [--kernel REGEX]          loops and MUFU distances of the matching kernels
  tools/sass_loops.py A.cubin --same-as B.cubin [--kernel RE]  whether each kernel's code is the same in both,
                                                               immediates (offsets, constants) aside
scripts/sass.sh builds the cubin of one source with the project's flags and runs this on it.
"""
import argparse
import re
import subprocess
import sys

_INSN = re.compile(r'^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;')
_REG = re.compile(r'\bR(\d+)\b')
# Instructions whose first operand is read, not written.
_NO_DEST = ('ST', 'STS', 'STG', 'STL', 'RED', 'BAR', 'BRA', 'EXIT', 'RET', 'CALL', 'LDGSTS', 'SYNCS', 'UTMA',
            'BSYNC', 'BSSY', 'WARPSYNC', 'DEPBAR', 'LDGDEPBAR', 'MEMBAR', 'NOP', 'ERRBAR', 'CCTL')


def read_sass(cubin):
    """{kernel name: [(address, text)]} from cuobjdump -sass."""
    try:
        out = subprocess.run(['cuobjdump', '-sass', cubin], capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        sys.exit('sass_loops.py: cuobjdump is not on PATH (scripts/sass.sh fetches it)')
    except subprocess.CalledProcessError as e:
        sys.exit(f'sass_loops.py: cuobjdump failed on {cubin}: {e.stderr.strip()}')
    kernels = {}
    for block in re.split(r'\n\s*Function : ', out)[1:]:
        name, body = block.split('\n', 1)
        insns = []
        for line in body.split('\n'):
            m = _INSN.match(line)
            if m:
                insns.append((int(m.group(1), 16), m.group(2)))
        kernels[name.strip()] = insns
    if not kernels:
        sys.exit(f'sass_loops.py: no kernels in {cubin}')
    return kernels


def split(text):
    """(opcode without predicate, operand text)."""
    text = re.sub(r'^@!?U?P\w+\s+', '', text)
    parts = text.split(None, 1)
    return parts[0], parts[1] if len(parts) > 1 else ''


def writes_and_reads(text):
    op, args = split(text)
    regs = [int(r) for r in _REG.findall(args)]
    if not regs or op.split('.')[0] in _NO_DEST:
        return set(), set(regs)
    return {regs[0]}, set(regs[1:])


def mufu_distances(body):
    """For each MUFU in body, the instructions until its destination is first read (None if never in body)."""
    out = []
    for i, (_, text) in enumerate(body):
        op, _ = split(text)
        if not op.startswith('MUFU'):
            continue
        dst = next(iter(writes_and_reads(text)[0]), None)
        dist = None
        for j in range(i + 1, len(body)):
            w, r = writes_and_reads(body[j][1])
            if dst in r:
                dist = j - i
                break
            if dst in w:
                break
        out.append((op, dist))
    return out


def loops(insns):
    """Loop bodies [(first address, last address, instructions)], innermost first."""
    found = []
    for addr, text in insns:
        m = re.search(r'\bBRA\b.*?(0x[0-9a-f]+)', text)
        if m and int(m.group(1), 16) < addr:  # a branch to itself is the kernel's trailing trap, not a loop
            top = int(m.group(1), 16)
            found.append((top, addr, [x for x in insns if top <= x[0] <= addr]))
    return sorted(found, key=lambda l: len(l[2]))


def spills(body):
    """Local-memory loads and stores (register spills and stack arrays) in body."""
    return sum(split(t)[0].split('.')[0] in ('LDL', 'STL') for _, t in body)


def report(kernels, pattern):
    for name, insns in kernels.items():
        if pattern and not re.search(pattern, name):
            continue
        n_mufu = sum(split(t)[0].startswith('MUFU') for _, t in insns)
        print(f'{name}\n  {len(insns)} instructions, {n_mufu} MUFU, {spills(insns)} LDL/STL')
        for top, end, body in loops(insns):
            d = mufu_distances(body)
            n_sp = spills(body)
            sp = f'; {n_sp} LDL/STL' if n_sp else ''
            if not d:
                print(f'  loop {top:#06x}-{end:#06x}: {len(body)} instructions, no MUFU{sp}')
                continue
            kinds = {}
            for op, _ in d:
                kinds[op] = kinds.get(op, 0) + 1
            read = [x for _, x in d if x is not None]
            dist = (f'first read after {min(read)}-{max(read)} instructions, mean {sum(read) / len(read):.1f}'
                    if read else 'results not read inside the loop')
            mix = ', '.join(f'{v} {k}' for k, v in sorted(kinds.items()))
            print(f'  loop {top:#06x}-{end:#06x}: {len(body)} instructions, {mix}; {dist}{sp}')


def same_as(a, b, pattern):
    """Compares kernels by name (or, when names differ, pairs the i-th match of each); True if all are equal."""
    strip = lambda insns: [re.sub(r'0x[0-9a-f]+', 'X', t) for _, t in insns]
    na = [n for n in a if not pattern or re.search(pattern, n)]
    nb = [n for n in b if not pattern or re.search(pattern, n)]
    if len(na) != len(nb):
        print(f'{len(na)} kernels match in the first cubin, {len(nb)} in the second')
        return False
    ok = True
    for x, y in zip(sorted(na), sorted(nb)):
        same = strip(a[x]) == strip(b[y])
        ok &= same
        print(f'{"same" if same else "DIFFERENT"}: {x}' + ('' if x == y else f' / {y}'))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('cubin')
    ap.add_argument('--kernel', default='', help='regular expression on the (mangled) kernel names')
    ap.add_argument('--same-as', metavar='CUBIN', help='compare code with another cubin instead of reporting')
    args = ap.parse_args()
    kernels = read_sass(args.cubin)
    if args.same_as:
        sys.exit(0 if same_as(kernels, read_sass(args.same_as), args.kernel) else 1)
    report(kernels, args.kernel)


if __name__ == '__main__':
    main()
