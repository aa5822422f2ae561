#!/usr/bin/env python3
"""The shared library's ABI against its committed baseline (docs/abi.md).

abidiff (abigail-tools) compares the baseline (abidw's XML of the last
release's library) with the library just built, counting only the types
the public headers define (a struct behind an opaque pointer may change
freely). An incompatible change fails unless the soname's major version
moved with it; an addition passes and is printed (record it with
--update once released).

  tests/abi_check.py BASELINE LIBRARY HEADERS      check
  tests/abi_check.py BASELINE LIBRARY HEADERS --update   write the baseline
  tests/abi_check.py --self-test    plant an incompatible change and an
                                    addition in a small library
"""
import os
import re
import subprocess
import sys
import tempfile

# abidiff's exit status: bits
ABIDIFF_ERROR, ABIDIFF_USAGE, ABIDIFF_CHANGE, ABIDIFF_INCOMPATIBLE = 1, 2, 4, 8


def soname_major(text):
    """The major version in a soname ("libdlock.so.0" -> "0"), or ""."""
    m = re.search(r"\.so\.(\d+)", text or "")
    return m.group(1) if m else ""


def baseline_soname(path):
    with open(path, encoding="utf-8") as f:
        m = re.search(r"soname='([^']*)'", f.read(4096))
    return m.group(1) if m else ""


def library_soname(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True,
                         text=True, check=True).stdout
    m = re.search(r"Library soname: \[([^\]]*)\]", out)
    return m.group(1) if m else ""


def removed_or_changed(report):
    """Whether abidiff's report removes or changes anything (functions,
    variables or their symbols): abidiff calls a changed struct behind a
    parameter a change (status 4), not an incompatible one (8), but a
    caller built against the old layout breaks all the same. Only
    additions are compatible."""
    for m in re.finditer(r"changes summary: (\d+) Removed(?:, (\d+) Changed)?",
                         report):
        if int(m.group(1)) or int(m.group(2) or 0):
            return True
    return False


def write_baseline(baseline, library, headers):
    subprocess.run(["abidw", "--no-corpus-path", "--headers-dir", headers,
                    "--out-file", baseline, library], check=True)


def check(baseline, library, headers):
    """0 when the ABI is compatible with the baseline (or the soname's
    major moved), 1 when not; what differs is printed."""
    run = subprocess.run(["abidiff", "--hd1", headers, "--hd2", headers,
                          baseline, library], capture_output=True, text=True)
    detail = run.stdout
    status = run.returncode
    if status & (ABIDIFF_ERROR | ABIDIFF_USAGE):
        print(f"abi: abidiff failed ({status}): {run.stderr.strip()}")
        return 1
    old, new = baseline_soname(baseline), library_soname(library)
    if status & ABIDIFF_INCOMPATIBLE or removed_or_changed(detail):
        if soname_major(old) != soname_major(new):
            print(f"abi: incompatible changes, and the soname moved from "
                  f"{old} to {new}: a new major version\n{detail}")
            return 0
        print(f"abi: INCOMPATIBLE changes under the same soname {new} "
              f"(move the major version, or keep the ABI):\n{detail}")
        return 1
    if status & ABIDIFF_CHANGE:
        print(f"abi: compatible changes (additions) against the baseline, "
              f"recorded here; write them into it with --update when "
              f"released:\n{detail}")
        return 0
    print(f"abi: {new} matches the baseline")
    return 0


LIB_V1 = "int point_sum(const struct point *p) { return p->x + p->y; }\n"
LIB_ADDED = LIB_V1 + "int point_diff(const struct point *p) { return p->x - p->y; }\n"
LIB_BROKEN = ("int point_sum(const struct point *p) "
              "{ return (int)p->x + p->y + p->z; }\n")
HEADER_V1 = "struct point { int x; int y; };\nint point_sum(const struct point *p);\n"
HEADER_ADDED = HEADER_V1 + "int point_diff(const struct point *p);\n"
HEADER_BROKEN = ("struct point { long x; int y; int z; };\n"
                 "int point_sum(const struct point *p);\n")


def build(dirname, name, source, header, soname):
    """A small shared library with its public header in dirname/name-h."""
    hdir = os.path.join(dirname, name + "-h")
    os.makedirs(hdir, exist_ok=True)
    with open(os.path.join(hdir, "point.h"), "w", encoding="utf-8") as f:
        f.write(header)
    src = os.path.join(dirname, name + ".c")
    with open(src, "w", encoding="utf-8") as f:
        f.write('#include "point.h"\n' + source)
    lib = os.path.join(dirname, name + ".so")
    subprocess.run(["cc", "-g", "-shared", "-fPIC", "-I", hdir,
                    "-Wl,-soname," + soname, "-o", lib, src], check=True)
    return lib, hdir


def self_test():
    ok = True
    with tempfile.TemporaryDirectory() as d:
        v1, h1 = build(d, "v1", LIB_V1, HEADER_V1, "libpoint.so.0")
        base = os.path.join(d, "base.abi")
        write_baseline(base, v1, h1)
        cases = [("the same library", LIB_V1, HEADER_V1, "libpoint.so.0", 0),
                 ("an addition", LIB_ADDED, HEADER_ADDED, "libpoint.so.0", 0),
                 ("a planted incompatible change", LIB_BROKEN, HEADER_BROKEN,
                  "libpoint.so.0", 1),
                 ("the same change with a new major", LIB_BROKEN,
                  HEADER_BROKEN, "libpoint.so.1", 0)]
        for i, (what, src, header, soname, want) in enumerate(cases):
            lib, hdir = build(d, f"c{i}", src, header, soname)
            print(f"abi self-test: {what} ({soname}):")
            got = check(base, lib, hdir)
            if got != want:
                print(f"abi self-test: {what}: got {got}, want {want}")
                ok = False
    print("abi self-test: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) not in (4, 5):
        print(__doc__)
        return 2
    baseline, library, headers = argv[1:4]
    if argv[4:] == ["--update"]:
        write_baseline(baseline, library, headers)
        print(f"abi: baseline written to {baseline}")
        return 0
    return check(baseline, library, headers)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
