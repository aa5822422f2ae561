#!/usr/bin/env python3
"""The layering check (docs/design.md): which folder of src/ may include
and call which. A folder depends on another when one of its files includes
a header of that folder ("net/cluster.h") or calls a function defined there
(a dlock_ or dlock__ name). Every dependency must point down the layers:

    kinds   fair rwlock multi redlock sync fence inspect
    lock    the lock recipe, blocking and non-blocking, and the reentrant
            and fenced kinds
    async   the operations of the non-blocking calls and their waiting
            without a thread, attached to the engine
    core    the engine
    net     transports and topologies
    base    errors, buffers, keys, slots, URIs, maps, the reply policy

The check fails on any dependency that points up (there is no list of
tolerated ones: the last, net -> core, was paid when the connection moved
into net/), and on any topology branch (`->cluster`, `->sentinel`, the
URI's topology constants) outside net/ but in the URI parser.

Usage: layering.py SRC_DIR [--self-test]
"""
import os
import re
import sys

ORDER = ["kinds", "lock", "async", "core", "net", "base"]
LAYER = {"fair": "kinds", "rwlock": "kinds", "multi": "kinds",
         "redlock": "kinds", "sync": "kinds", "fence": "kinds",
         "inspect": "kinds", "lock": "lock", "async": "async",
         "core": "core", "net": "net", "base": "base"}

# Topology branches outside net/, per folder, as the code has them today:
# none since the topology interface (net/topology.h). A branch is a test of
# which topology a client has (`->cluster`, `->sentinel`, the URI's
# DLOCK__URI_CLUSTER or DLOCK__URI_SENTINEL); the URI parser, which reads
# the scheme that names the topology, is the one place outside net/ that
# may say them.
BRANCHES = {}
BRANCH_FREE = {"base/uri.c", "base/uri.h"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)
DEFINE = re.compile(r'^(?!static\b)[A-Za-z_][\w \t\*]*?\b(dlock_{1,2}\w+)\s*\([^;]*$',
                    re.M)
CALL = re.compile(r'\b(dlock_{1,2}\w+)\s*\(')
BRANCH = re.compile(r'->(cluster|sentinel)\b|\bDLOCK__URI_(CLUSTER|SENTINEL)\b')
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)


def sources(src):
    for folder in sorted(os.listdir(src)):
        path = os.path.join(src, folder)
        if not os.path.isdir(path):
            continue
        for name in sorted(os.listdir(path)):
            if name.endswith((".c", ".h")):
                with open(os.path.join(path, name), encoding="utf-8") as f:
                    yield folder, name, COMMENT.sub(" ", f.read())


def edges(src):
    files = list(sources(src))
    defined = {}
    for folder, name, text in files:
        if name.endswith(".c"):
            for fn in DEFINE.findall(text):
                defined.setdefault(fn, folder)
    found, branches = {}, {}
    for folder, name, text in files:
        where = "%s/%s" % (folder, name)
        for to in INCLUDE.findall(text):
            if to in LAYER and to != folder:
                found.setdefault((folder, to, "include"), where)
        for fn in CALL.findall(text):
            to = defined.get(fn)
            if to and to != folder:
                found.setdefault((folder, to, "call"), "%s: %s" % (where, fn))
        if folder != "net" and where not in BRANCH_FREE:
            branches[folder] = branches.get(folder, 0) + len(BRANCH.findall(text))
    return found, branches


def allowed(frm, to):
    a, b = LAYER.get(frm), LAYER.get(to)
    return a is not None and b is not None and ORDER.index(b) > ORDER.index(a)


def judge(found, branches):
    errors = []
    for (frm, to, how), where in sorted(found.items()):
        if not allowed(frm, to):
            errors.append("%s -> %s (%s) points up: %s" % (frm, to, how, where))
    for folder, n in sorted(branches.items()):
        if n > BRANCHES.get(folder, 0):
            errors.append("%s has %d topology branches (->cluster, ->sentinel, "
                          "DLOCK__URI_CLUSTER/SENTINEL), "
                          "at most %d: ask the topology instead" %
                          (folder, n, BRANCHES.get(folder, 0)))
        elif n < BRANCHES.get(folder, 0):
            errors.append("%s has %d topology branches, fewer than the %d "
                          "listed: lower BRANCHES" %
                          (folder, n, BRANCHES[folder]))
    for folder in branches:
        if folder not in LAYER:
            errors.append("%s is a folder with no layer: add it to LAYER" % folder)
    return errors


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    found, branches = edges(sys.argv[1])
    errors = judge(found, branches)
    if "--self-test" in sys.argv:
        # an include and a call against the direction must be caught
        planted = dict(found)
        planted[("net", "lock", "include")] = "net/planted.c"
        planted[("net", "core", "call")] = "net/planted.c: dlock__send"
        errs = judge(planted, branches)
        caught = any("net -> lock (include)" in e for e in errs)
        called = any("net -> core (call)" in e for e in errs)
        # and one topology branch in the engine
        text = "if (c->cluster) dlock__x(); if (u->topology == DLOCK__URI_SENTINEL) y();"
        more = dict(branches)
        more["core"] = more.get("core", 0) + len(BRANCH.findall(text))
        branched = any("core has 2 topology branches" in e
                       for e in judge(found, more))
        print("planted include caught: %s; planted call caught: %s; planted "
              "branches caught: %s" % (caught, called, branched))
        return 0 if caught and called and branched and not errors else 1
    for e in errors:
        print("layering: " + e)
    up = [edge for edge in found if not allowed(edge[0], edge[1])]
    print("layering: %d dependencies between folders, %d against the direction, "
          "%d topology branches outside net/" %
          (len(found), len(up), sum(branches.values())))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
