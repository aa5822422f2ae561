#!/usr/bin/env python3
"""Sizes a newcomer can read: no function over 80 lines in src/, tools/ or
bench/, and no file over 800 lines in tools/ or bench/ (docs/design.md).

A function is counted from the line that names it to its closing brace at
the start of a line (the house style's layout).

  tests/sizes.py ROOT              check the tree
  tests/sizes.py ROOT --self-test  plant a long function and a long file
"""
import os
import re
import sys
import tempfile

MAX_FUNCTION = 80
MAX_FILE = 800
FUNCTIONS_IN = ("src", "tools", "bench")
FILES_IN = ("tools", "bench")

HEAD = re.compile(r"^(?!static_assert|typedef|return\b|else\b|if\b|for\b|while\b)"
                  r"[A-Za-z_][\w \t\*]*?\b(\w+)\s*\(")


def functions(lines):
    """(name, first line, length) of each function definition."""
    out, start, name = [], None, None
    for i, line in enumerate(lines):
        if start is None:
            m = HEAD.match(line)
            if not m:
                continue
            j = i  # the signature may span lines: up to its opening brace
            while j < len(lines) and "{" not in lines[j] and ";" not in lines[j]:
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith("{") and \
                    ";" not in lines[j]:
                start, name = i, m.group(1)
        elif line.startswith("}"):
            out.append((name, start + 1, i - start + 1))
            start = None
    return out


def check(root):
    problems = []
    for top in FUNCTIONS_IN:
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in sorted(names):
                if not n.endswith((".c", ".h")):
                    continue
                path = os.path.join(d, n)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8") as f:
                    lines = f.read().split("\n")
                for name, first, length in functions(lines):
                    if length > MAX_FUNCTION:
                        problems.append("%s:%d: %s is %d lines (at most %d)" %
                                        (rel, first, name, length, MAX_FUNCTION))
                if top in FILES_IN and len(lines) - 1 > MAX_FILE:
                    problems.append("%s is %d lines (at most %d in %s/)" %
                                    (rel, len(lines) - 1, MAX_FILE, top))
    return problems


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    root = sys.argv[1]
    if "--self-test" in sys.argv[2:]:
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "src", "core"))
            os.makedirs(os.path.join(d, "tools"))
            with open(os.path.join(d, "src", "core", "long.c"), "w") as f:
                f.write("static int long_one(int a,\n                    int b) {\n" +
                        "  a++;\n" * 90 + "  return a + b;\n}\n")
            with open(os.path.join(d, "tools", "big.c"), "w") as f:
                f.write("int x;\n" * 900)
            got = check(d)
            found = (any("long_one is 94 lines" in p for p in got),
                     any("tools/big.c is 900 lines" in p for p in got))
            print("sizes self-test: long function caught: %s; long file caught: "
                  "%s" % found)
            return 0 if all(found) else 1
    problems = check(root)
    for p in problems:
        print("sizes: " + p)
    print("sizes: %d functions or files over the bounds" % len(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
