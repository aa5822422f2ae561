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


def versioned_structs(headers):
    """The public structs that carry a `version` member (dlock_client_opts):
    a caller says which fields it knows, so fields appended at their end
    are an addition (docs/abi.md)."""
    names = set()
    for root, _, files in os.walk(headers):
        for f in files:
            if not f.endswith(".h"):
                continue
            with open(os.path.join(root, f), encoding="utf-8") as h:
                text = h.read()
            for m in re.finditer(r"struct (\w+) \{(.*?)\n\}", text, re.S):
                if re.search(r"^\s*unsigned(?: int)? version;", m.group(2), re.M):
                    names.add(m.group(1))
    return names


# The lines of a report that only walk from a function to a type
WALK = [r"\[C\] '(function|variable) .*' .*has some (indirect )?sub-type changes:",
        r"parameter \d+ of type '.*' has sub-type changes:",
        r"return type changed:",
        r"in pointed to type '.*':",
        r"in unqualified underlying type '(?!struct ).*'( at .*)?:",
        r"in referenced type '.*':"]


def appended_only(report, versioned):
    """Whether every changed function or variable of the report changed
    only by fields appended to a versioned struct: the struct grew, each
    new member sits at or past its old end, and no member changed or went
    away. Anything else in a changed item's description is a change."""
    lines = [l.strip() for l in report.splitlines()]
    start = next((i for i, l in enumerate(lines) if l.startswith("[C] ")), None)
    if start is None:
        return False
    old_end, in_struct, grew = None, False, False
    for l in lines[start:]:
        if not l or any(re.fullmatch(w, l) for w in WALK):
            continue
        m = re.fullmatch(r"(?:in unqualified )?(?:underlying )?type 'struct "
                         r"(\w+)'(?: at \S+)?(?: changed)?:", l)
        if m:
            if m.group(1) not in versioned:
                return False
            in_struct, old_end = True, None
            continue
        m = re.fullmatch(r"type size changed from (\d+) to (\d+) \(in bits\)", l)
        if m and in_struct and int(m.group(2)) > int(m.group(1)):
            old_end, grew = int(m.group(1)), True
            continue
        if in_struct and re.fullmatch(r"\d+ data member insertions?:", l):
            continue
        m = re.fullmatch(r"'.*', at offset (\d+) \(in bits\)( at .*)?", l)
        if m and in_struct and old_end is not None and int(m.group(1)) >= old_end:
            continue
        if in_struct and re.fullmatch(r"no data member changes? \(\d+ filtered\);?", l):
            continue
        return False
    return grew


def removed_or_changed(report, versioned=frozenset()):
    """Whether abidiff's report removes or changes anything (functions,
    variables or their symbols): abidiff calls a changed struct behind a
    parameter a change (status 4), not an incompatible one (8), but a
    caller built against the old layout breaks all the same. Only
    additions are compatible: new calls, and fields appended to a struct
    that carries a version (appended_only)."""
    changed = False
    for m in re.finditer(r"changes summary: (\d+) Removed(?:, (\d+) Changed)?",
                         report):
        if int(m.group(1)):
            return True
        changed |= int(m.group(2) or 0) > 0
    return changed and not appended_only(report, versioned)


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
    if status & ABIDIFF_INCOMPATIBLE or removed_or_changed(
            detail, versioned_structs(headers)):
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
# a struct that carries its version: a field appended is an addition, one
# put before the others a change
LIB_OPTS = "int opts_use(const struct opts *o) { return (int)o->version + o->a; }\n"
HEADER_OPTS = "struct opts {\n  unsigned version;\n  int a;\n};\nint opts_use(const struct opts *o);\n"
HEADER_OPTS_APPENDED = ("struct opts {\n  unsigned version;\n  int a;\n"
                        "  long b;\n};\nint opts_use(const struct opts *o);\n")
HEADER_OPTS_INSERTED = ("struct opts {\n  unsigned version;\n  long b;\n"
                        "  int a;\n};\nint opts_use(const struct opts *o);\n")


def build(dirname, name, source, header, soname, hname="point.h"):
    """A small shared library with its public header in dirname/name-h."""
    hdir = os.path.join(dirname, name + "-h")
    os.makedirs(hdir, exist_ok=True)
    with open(os.path.join(hdir, hname), "w", encoding="utf-8") as f:
        f.write(header)
    src = os.path.join(dirname, name + ".c")
    with open(src, "w", encoding="utf-8") as f:
        f.write(f'#include "{hname}"\n' + source)
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
        o1, oh1 = build(d, "o1", LIB_OPTS, HEADER_OPTS, "libopts.so.0", "opts.h")
        obase = os.path.join(d, "opts.abi")
        write_baseline(obase, o1, oh1)
        for i, (what, header, want) in enumerate([
                ("a field appended to a versioned struct", HEADER_OPTS_APPENDED, 0),
                ("a field put before a versioned struct's others",
                 HEADER_OPTS_INSERTED, 1)]):
            lib, hdir = build(d, f"o{i + 2}", LIB_OPTS, header, "libopts.so.0",
                              "opts.h")
            print(f"abi self-test: {what}:")
            got = check(obase, lib, hdir)
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
