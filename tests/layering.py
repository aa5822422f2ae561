#!/usr/bin/env python3
"""The layering check (docs/design.md): which folder of src/ may include
and call which. A folder depends on another when one of its files includes
a header of that folder ("net/cluster.h") or calls a function defined there
(a dlock_ or dlock__ name). Every dependency must point down the layers:

    inspect what a name holds and the watch on it (dlock watch listens
            on every kind's channel: it reads the catalog)
    catalog the kinds made on one name, by name (dlock_lock_new)
    kinds   fair rwlock spin multi redlock sync fence election
    lock    the lock recipe, blocking and non-blocking, and the reentrant
            and fenced kinds
    async   the operations of the non-blocking calls and their waiting
            without a thread, attached to the engine
    core    the engine, the blocking call and the client (core/), and the
            direct path (direct/: a call made on the calling thread), two
            folders of one layer that may call each other
    net     transports and topologies
    base    errors, buffers, keys, slots, URIs, maps, the reply policy

The check fails on any dependency that points up (there is no list of
tolerated ones: the last, net -> core, was paid when the connection moved
into net/), and on any topology branch (`->cluster`, `->sentinel`, the
URI's topology constants) outside net/ but in the URI parser.

Public headers (include/dlock, beside SRC_DIR) count as part of the lowest
layer that implements a function they declare (dlock/client.h: base, for
dlock_uri_redact; dlock/async.h: async; dlock/lock.h: lock), and the
umbrella dlock/dlock.h as the top: a folder may include those of its own
layer or below. And the client's own fields (struct dlock_client, core's)
are read in core and its direct path alone: elsewhere a client is used
through core's calls.

A kind's folder named in the catalog's list of built-in kinds needs no
line here: it is of the kinds' layer.

A kind sees the layers below through one header: a file of a kind's
folder (the kinds, the catalog and inspect) includes lock/lock_impl.h and no other
header of lock/, async/, core/, direct/ or net/ (base/ and its own
folder's are its to include).

Usage: layering.py SRC_DIR [--self-test]
"""
import os
import re
import sys

ORDER = ["inspect", "catalog", "kinds", "lock", "async", "core", "net", "base"]
LAYER = {"fair": "kinds", "rwlock": "kinds", "spin": "kinds", "multi": "kinds",
         "redlock": "kinds", "sync": "kinds", "fence": "kinds",
         "election": "kinds", "inspect": "inspect", "catalog": "catalog",
         "lock": "lock", "async": "async",
         "core": "core", "direct": "core", "net": "net", "base": "base"}
# A kind's folder named in the catalog's list of built-in kinds
# (src/catalog/catalog.c: "X(name)  /* src/FOLDER */") is of the kinds'
# layer without a line here: a new kind's folder is its own.
CATALOG_FOLDER = re.compile(r"X\(\w+\)\s*/\*\s*src/(\w+)\s*\*/")


def catalog_folders(src):
    """The folders the catalog names for its built-in kinds."""
    try:
        with open(os.path.join(src, "catalog", "catalog.c")) as f:
            return set(CATALOG_FOLDER.findall(f.read()))
    except OSError:
        return set()


# Folders of one layer that may depend on each other (other folders of one
# layer may not: the kinds stand beside each other).
PEERS = {frozenset({"core", "direct"})}

# Topology branches outside net/, per folder, as the code has them today:
# none since the topology interface (net/topology.h). A branch is a test of
# which topology a client has (`->cluster`, `->sentinel`, the URI's
# DLOCK__URI_CLUSTER or DLOCK__URI_SENTINEL); the URI parser, which reads
# the scheme that names the topology, is the one place outside net/ that
# may say them.
BRANCHES = {}
BRANCH_FREE = {"base/uri.c", "base/uri.h"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)
PUBLIC = re.compile(r'^\s*#\s*include\s+["<]dlock/(\w+\.h)[">]', re.M)
DECL = re.compile(r'\b(dlock_[a-z]\w*)\s*\(')
# The structs whose fields only their folders read, and those folders (the
# first names it in messages).
PRIVATE = {"dlock_client": ("core", "direct")}
STRUCT = r'^struct %s \{(.*?)^\};'
TYPED = r'\b%s\s*\*\s*(?:const\s+)?(\w+)'
# in a header, a struct's member (a prototype's parameter names nothing)
MEMBER = r'^\s+(?:const\s+)?%s\s*\*\s*(?:const\s+)?(\w+)\s*;'
ACCESS = re.compile(r'\b(\w+)\s*->\s*(\w+)')
DEFINE = re.compile(r'^(?!static\b)[A-Za-z_][\w \t\*]*?\b(dlock_{1,2}\w+)\s*\([^;]*$',
                    re.M)
CALL = re.compile(r'\b(dlock_{1,2}\w+)\s*\(')
BRANCH = re.compile(r'->(cluster|sentinel)\b|\bDLOCK__URI_(CLUSTER|SENTINEL)\b')
KIND_HEADER = "lock/lock_impl.h"
BELOW = ("lock", "async", "core", "direct", "net")
ANY_INCLUDE = re.compile(r'^\s*#\s*include\s+"(([a-z_]+)/[^"]+)"', re.M)
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
    return found, branches, files, defined


def header_layers(src, defined):
    """Each public header's layer: the lowest of the folders defining the
    functions it declares (dlock.h, which declares none and includes them
    all: the top)."""
    inc = os.path.join(os.path.dirname(os.path.abspath(src)), "include", "dlock")
    layers = {}
    for name in sorted(os.listdir(inc)) if os.path.isdir(inc) else []:
        if not name.endswith(".h"):
            continue
        with open(os.path.join(inc, name), encoding="utf-8") as f:
            text = COMMENT.sub(" ", f.read())
        folders = {defined[fn] for fn in DECL.findall(text) if fn in defined}
        ranks = [ORDER.index(LAYER[d]) for d in folders if d in LAYER]
        layers[name] = ORDER[max(ranks)] if ranks else ORDER[0]
    return layers


def header_edges(files, layers):
    """(folder, header, layer) -> where, for each public header a folder
    includes."""
    found = {}
    for folder, name, text in files:
        for h in PUBLIC.findall(text):
            if h in layers:
                found.setdefault((folder, h, layers[h]), "%s/%s" % (folder, name))
    return found


def private_reads(files):
    """(folder, struct, field) -> where: a private struct's field read
    outside its folder, through a name declared of its pointer type in that
    file, or a struct member of that type declared in any header."""
    fields, names = {}, {}
    for folder, name, text in files:
        for struct, owners in PRIVATE.items():
            if folder == owners[0] and name.endswith(".h"):
                m = re.search(STRUCT % struct, text, re.M | re.S)
                if m:
                    body = re.sub(r"\([^()]*\)", "", m.group(1))
                    fields[struct] = set(
                        re.findall(r"(\w+)\s*(?:\[[^\]]*\])?\s*[;,]", body))
            if name.endswith(".h"):
                names.setdefault(struct, set()).update(
                    re.findall(MEMBER % struct, text, re.M))
    found = {}
    for folder, name, text in files:
        for struct, owners in PRIVATE.items():
            if folder in owners:
                continue
            mine = names.get(struct, set()) | set(re.findall(TYPED % struct, text))
            for var, field in ACCESS.findall(text):
                if var in mine and field in fields.get(struct, ()):
                    found.setdefault((folder, struct, field),
                                     "%s/%s: %s->%s" % (folder, name, var, field))
    return found


def kind_includes(files):
    """folder/name -> header: a kind's include of a header below it other
    than its one header."""
    found = {}
    for folder, name, text in files:
        if LAYER.get(folder) not in ("kinds", "catalog", "inspect"):
            continue
        for header, where in ANY_INCLUDE.findall(text):
            if where in BELOW and header != KIND_HEADER:
                found["%s/%s" % (folder, name)] = header
    return found


def allowed(frm, to):
    a, b = LAYER.get(frm), LAYER.get(to)
    if frozenset({frm, to}) in PEERS:
        return True
    return a is not None and b is not None and ORDER.index(b) > ORDER.index(a)


def judge(found, branches, headers=None, private=None, kinds=None):
    errors = []
    for where, header in sorted((kinds or {}).items()):
        errors.append("%s includes %s: a kind sees the layers below through "
                      "%s alone" % (where, header, KIND_HEADER))
    for (frm, h, layer), where in sorted((headers or {}).items()):
        if frm in LAYER and ORDER.index(layer) < ORDER.index(LAYER[frm]):
            errors.append("%s -> dlock/%s (a %s header) points up: %s" %
                          (frm, h, layer, where))
    for (frm, struct, field), where in sorted((private or {}).items()):
        errors.append("%s reads struct %s's field %s, %s's own: %s (use a "
                      "call of %s)" % (frm, struct, field, PRIVATE[struct][0],
                                       where, PRIVATE[struct][0]))
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
    for folder in catalog_folders(sys.argv[1]):
        LAYER.setdefault(folder, "kinds")
    found, branches, files, defined = edges(sys.argv[1])
    layers = header_layers(sys.argv[1], defined)
    headers = header_edges(files, layers)
    private = private_reads(files)
    kinds = kind_includes(files)
    errors = judge(found, branches, headers, private, kinds)
    if "--self-test" in sys.argv:
        # an include and a call against the direction must be caught
        planted = dict(found)
        planted[("net", "lock", "include")] = "net/planted.c"
        planted[("net", "core", "call")] = "net/planted.c: dlock__send"
        planted[("fair", "rwlock", "call")] = "fair/planted.c: dlock__rw"
        errs = judge(planted, branches)
        beside = any("fair -> rwlock (call)" in e for e in errs)
        caught = any("net -> lock (include)" in e for e in errs)
        called = any("net -> core (call)" in e for e in errs)
        # and one topology branch in the engine
        text = "if (c->cluster) dlock__x(); if (u->topology == DLOCK__URI_SENTINEL) y();"
        more = dict(branches)
        more["core"] = more.get("core", 0) + len(BRANCH.findall(text))
        branched = any("core has 2 topology branches" in e
                       for e in judge(found, more))
        # a kind's public header in core, and the engine's lock read in async
        planted_files = files + [
            ("core", "planted.c", '#include "dlock/async.h"\n'),
            ("async", "planted.c", "void f(dlock_client *c) { "
             "pthread_mutex_lock(&c->qmu); }\n")]
        errs = judge(found, branches, header_edges(planted_files, layers),
                     private_reads(planted_files))
        header = any("core -> dlock/async.h" in e for e in errs)
        field = any("async reads struct dlock_client's field qmu" in e
                    for e in errs)
        print("planted include caught: %s; planted call caught: %s; planted "
              "branches caught: %s; planted public header caught: %s; "
              "planted private field caught: %s" %
              (caught, called, branched, header, field))
        print("planted call between two kinds caught: %s" % beside)
        # a kind that includes the engine's header
        inside = kind_includes(files + [("spin", "planted.c",
                                         '#include "core/engine.h"\n')])
        engine = any("spin/planted.c includes core/engine.h" in e
                     for e in judge(found, branches, kinds=inside))
        print("planted engine header in a kind caught: %s" % engine)
        return 0 if caught and called and branched and header and field \
            and beside and engine and not errors else 1
    for e in errors:
        print("layering: " + e)
    up = [edge for edge in found if not allowed(edge[0], edge[1])]
    print("layering: %d dependencies between folders, %d against the direction, "
          "%d topology branches outside net/; %d public headers included by "
          "a folder, %d private fields read outside their folder, %d "
          "headers below a kind's one included by a kind" %
          (len(found), len(up), sum(branches.values()), len(headers),
           len(private), len(kinds)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
