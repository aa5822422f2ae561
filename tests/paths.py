#!/usr/bin/env python3
"""Every file a comment or a doc names exists.

Reads the comments of the C, Lua, Python, shell and meson files and the
whole text of the Markdown docs, README and man page; every name there that
looks like one of the project's files (src/core/wait.c, core/wait.c,
wait.c, docs/fair.md, lua/lock_acquire.lua ...) must be the end of a path
in the tree, so a rename cannot leave a comment or a page pointing at
nothing. Names of other projects' files (system headers, hiredis, libuv,
Redisson's sources) are listed below as known.

  tests/paths.py ROOT              check the tree
  tests/paths.py ROOT --self-test  plant a wrong name and see it found
"""
import os
import re
import subprocess
import sys
import tempfile

EXT = r"(?:c|h|md|lua|py|sh|js|json|build|txt|supp|1)"
NAME = re.compile(r"(?<![\w./<-])((?:[\w-]+/)*[\w-]+\." + EXT + r")(?![\w/-])")

# Files of other projects and the system that the text names on purpose.
KNOWN = {
    "hiredis.h", "read.h", "uv.h", "ssl.h",
    "err.h", "stdatomic.h", "pthread.h", "stdio.h", "stdlib.h", "string.h",
    "unistd.h", "errno.h", "poll.h", "time.h", "signal.h", "stdint.h",
    "inttypes.h", "sys/socket.h", "netinet/tcp.h", "uuid.h", "CUnit.h",
    "sqlite3.c", "sqlite3.h", "package.json", "package-lock.json",
    "node_modules", "index.js", "redis.conf", "sentinel.conf", "nodes.conf",
    "redis.log", "appendonly.aof", "tsan.supp", "compile_commands.json",
    "build.ninja", "testlog.txt", "CMakeLists.txt", "setup.py",
    "RedissonLock.java", "RedissonFairLock.java", "RedissonReadWriteLock.java",
    "RedissonReadLock.java", "RedissonWriteLock.java",
    "RedissonCountDownLatch.java", "RedissonSemaphore.java",
    "RedissonPermitExpirableSemaphore.java", "RedissonFencedLock.java",
    "RedissonMultiLock.java", "RedissonRedLock.java",
    "Node.js", "app.c",  # a runtime; a user's program in the examples
    "version.h",         # made by meson from its .in beside the headers
}

# A history of the design: it names files as they were then.
HISTORY = {"docs/design-changes.md"}

SKIP_DIRS = {"build", "node_modules", ".git"}


def files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True,
                             text=True, check=True).stdout.split()
        listed = [f for f in out if os.path.exists(os.path.join(root, f))]
        untracked = subprocess.run(
            ["git", "-C", root, "ls-files", "--others", "--exclude-standard"],
            capture_output=True, text=True, check=True).stdout.split()
        return sorted(set(listed + untracked))
    except (OSError, subprocess.CalledProcessError):
        found = []
        for d, subdirs, names in os.walk(root):
            subdirs[:] = [s for s in subdirs if s not in SKIP_DIRS and
                          not s.startswith("build")]
            for n in names:
                found.append(os.path.relpath(os.path.join(d, n), root))
        return sorted(found)


C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
HASH_COMMENT = re.compile(r"(?:^|\s)(?:#|--)[^\n]*")


def text_of(path, body):
    """The part of a file that is prose about the project."""
    if path.endswith((".c", ".h", ".js")):
        return "\n".join(C_COMMENT.findall(body))
    if path.endswith((".py", ".sh", "meson.build", ".lua")) or "/scripts/" in "/" + path:
        return "\n".join(HASH_COMMENT.findall(body))
    if path.endswith((".md", ".1")) or os.path.basename(path) == "README.md":
        return body
    return ""


def check(root):
    tree = files(root)
    ends = set()
    for f in tree:
        parts = f.split("/")
        for i in range(len(parts)):
            ends.add("/".join(parts[i:]))
    missing = []
    for f in tree:
        if f.endswith(("package-lock.json",)) or "/node_modules/" in f or \
                f in HISTORY:
            continue
        try:
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                body = fh.read()
        except (UnicodeDecodeError, OSError):
            continue
        prose = text_of(f, body)
        for m in NAME.finditer(prose):
            name = m.group(1)
            if not re.search(r"[A-Za-z]", name.rsplit(".", 1)[0]) or \
                    name.startswith("build/"):
                continue  # a version or a figure (7.1), a build's output
            start = max(0, m.start() - 8)
            if "://" in prose[start:m.start()] or name in KNOWN:
                continue
            if os.path.basename(name) in KNOWN:
                continue
            if name not in ends:
                line = body.count("\n", 0, body.find(name)) + 1 if name in body else 0
                missing.append((f, line, name))
    return missing


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    root = sys.argv[1]
    if "--self-test" in sys.argv[2:]:
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "src", "core"))
            with open(os.path.join(d, "src", "core", "wait.c"), "w") as fh:
                fh.write("/* the recipe (core/recipe.c) and wait.c itself */\n")
            with open(os.path.join(d, "README.md"), "w") as fh:
                fh.write("See docs/nowhere.md and src/core/wait.c.\n")
            got = sorted(n for _, _, n in check(d))
            want = ["core/recipe.c", "docs/nowhere.md"]
            if got != want:
                print(f"paths self-test: found {got}, want {want}")
                return 1
            print("paths self-test: the planted names were found")
            return 0
    missing = check(root)
    for f, line, name in missing:
        print(f"{f}:{line}: names {name}, which does not exist")
    print(f"paths: {len(missing)} names of missing files")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
