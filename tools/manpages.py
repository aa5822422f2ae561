#!/usr/bin/env python3
"""Section 3 man pages for every public call, from the public headers.

Each call's page is made from its header: the comment above its
declaration (what it does, its arguments, its errors), the declaration
itself, the header's "Thread-safety:" paragraph, and the meaning of every
error code the comment names (from error.h's table). The headers are where
a call is documented for C programmers already; generating the pages from
them keeps one text, reviewed with the code, instead of two that drift.

  tools/manpages.py HEADERS_DIR OUT_DIR VERSION     write OUT_DIR/NAME.3
  tools/manpages.py HEADERS_DIR --install MANDIR VERSION   the same into
        meson's install (MANDIR/man3 under MESON_INSTALL_DESTDIR_PREFIX)
  tools/manpages.py HEADERS_DIR --check LIBRARY     every exported dlock_*
        symbol has a page and every page names an exported symbol; each
        page renders without a warning (groff)
"""
import os
import re
import subprocess
import sys
import tempfile

HEADERS = ("client.h", "lock.h", "rwlock.h", "multi.h", "sync.h",
           "election.h", "fence.h", "inspect.h", "stats.h", "async.h",
           "reply.h", "error.h")

# A few calls get a worked example: the ones a program starts from.
EXAMPLE_LOCK = r"""#include <dlock/dlock.h>
#include <stdio.h>

int main(void) {
  dlock_client *c;
  if (dlock_client_open("redis://127.0.0.1:6379", NULL, &c) != DLOCK_OK) {
    fprintf(stderr, "open: %s\n", dlock_errmsg());
    return 1;
  }
  dlock_lock *l;
  int rc = dlock_reentrant_lock_new(c, "orders:42", NULL, &l);
  if (rc == DLOCK_OK)
    rc = dlock_acquire(l, 5000, -1); /* wait up to 5 s; watchdog lease */
  if (rc == DLOCK_OK) {
    /* ... the critical section ... */
    rc = dlock_release(l);
  }
  if (rc != DLOCK_OK)
    fprintf(stderr, "%s: %s\n", dlock_errname(rc), dlock_errmsg());
  dlock_lock_free(l);
  dlock_client_close(c);
  return rc == DLOCK_OK ? 0 : 1;
}"""
EXAMPLES = {"dlock_client_open": EXAMPLE_LOCK, "dlock_acquire": EXAMPLE_LOCK,
            "dlock_release": EXAMPLE_LOCK,
            "dlock_reentrant_lock_new": EXAMPLE_LOCK}

DECL = re.compile(r"DLOCK_API\s+(.*?)\b(dlock_\w+)\s*\((.*?)\)\s*;", re.S)


def comment_text(block):
    """The words of a /* ... */ block, its leading stars gone."""
    body = block.strip()
    body = body[2:] if body.startswith("/*") else body
    body = body[:-2] if body.endswith("*/") else body
    lines = []
    for line in body.split("\n"):
        line = re.sub(r"^\s*\*( |$)", "", line.rstrip())
        lines.append(line.strip() if not line.startswith("  ") else line)
    return "\n".join(lines).strip()


def error_table(headers_dir):
    text = open(os.path.join(headers_dir, "error.h"), encoding="utf-8").read()
    return {"DLOCK_" + m.group(1): (int(m.group(2)), m.group(3))
            for m in re.finditer(r'X\((\w+), (-\d+), "([^"]*)"\)', text)}


def thread_safety(text):
    m = re.search(r"Thread-safety:(.*?)(?:\n \*\s*\n|\*/)", text, re.S)
    if m is None:
        return "Any thread (docs/threading.md)."
    return " ".join(w.strip(" *") for w in m.group(1).split("\n")).strip()


def calls(headers_dir):
    """(name, header, return type, parameters, comment, thread safety) of
    every public call."""
    out = []
    for h in HEADERS:
        text = open(os.path.join(headers_dir, h), encoding="utf-8").read()
        safety = thread_safety(text)
        for m in DECL.finditer(text):
            before = text[:m.start()].rstrip()
            comment = ""
            if before.endswith("*/"):
                start = before.rfind("/*")
                comment = comment_text(before[start:])
            ret = " ".join(m.group(1).split())
            params = " ".join(m.group(3).split())
            out.append((m.group(2), h, ret, params, comment, safety))
    return out


def roff(text):
    """Text for a roff line: backslashes and leading dots escaped."""
    text = text.replace("\\", "\\e")
    return re.sub(r"^([.'])", r"\\&\1", text, flags=re.M)


def paragraphs(comment):
    """The comment as roff: an argument list ("name  what it is") as
    tagged paragraphs, the rest as paragraphs."""
    out = []
    para = []
    for line in comment.split("\n"):
        arg = re.match(r"^(\w+)\s{2,}(\S.*)$", line)
        if arg:
            if para:
                out.append(".PP\n" + roff(" ".join(para)))
                para = []
            out.append(".TP\n.I " + arg.group(1) + "\n" + roff(arg.group(2)))
        elif line.strip() == "":
            if para:
                out.append(".PP\n" + roff(" ".join(para)))
                para = []
        else:
            para.append(line.strip())
    if para:
        out.append(".PP\n" + roff(" ".join(para)))
    return "\n".join(out)


def short(comment):
    """The comment's first sentence, cut at a comma or parenthesis to about
    70 characters: the page's NAME line."""
    first = re.split(r"(?<=\.)\s", " ".join(comment.split()), maxsplit=1)[0]
    first = first.rstrip(".")
    while len(first) > 70:
        cut = max(first.rfind(",", 0, 70), first.rfind(" (", 0, 70),
                  first.rfind(":", 0, 70))
        if cut <= 0:
            cut = first.rfind(" ", 0, 70)
        first = first[:cut]
    return first


def page(call, errors, version):
    name, header, ret, params, comment, safety = call
    summary = short(comment) or "see " + header
    lines = [f'.TH {name.upper()} 3 "" "dlock {version}" "dlock manual"',
             ".SH NAME", f"{name} \\- {roff(summary)}",
             ".SH SYNOPSIS", ".nf", f".B #include <dlock/{header}>", ".PP",
             roff(f"{ret} {name}({params});"), ".fi", ".PP",
             "Link with \\fB\\-ldlock\\fP (\\fBpkg\\-config \\-\\-libs dlock\\fP).",
             ".SH DESCRIPTION", paragraphs(comment) or ".PP\nSee " + header + "."]
    named = [e for e in dict.fromkeys(re.findall(r"\bDLOCK_E[A-Z]+\b", comment))
             if e in errors]
    lines.append(".SH RETURN VALUE")
    if ret == "int" and (named or "Errors" in comment or "DLOCK_OK" in comment):
        lines.append(".PP\n\\fBDLOCK_OK\\fP (0) on success, else a negative "
                     "code; \\fBdlock_errmsg\\fP(3) then says why in words. "
                     "The codes this call names:")
        for e in named:
            num, text = errors[e]
            lines.append(f".TP\n.B {e}\n({num}) {roff(text)}")
    else:
        lines.append(".PP\nAs the description says.")
    lines += [".SH THREAD SAFETY", ".PP", roff(safety[:1].upper() + safety[1:])]
    if name in EXAMPLES:
        lines += [".SH EXAMPLE", ".EX", roff(EXAMPLES[name]), ".EE"]
    see = [s for s in dict.fromkeys(re.findall(r"\b(dlock_\w+)\(\)", comment))
           if s != name]
    if ret == "int" and "dlock_errmsg" not in see and name != "dlock_errmsg":
        see.append("dlock_errmsg")
    lines.append(".SH SEE ALSO")
    lines.append(", ".join(f"\\fB{s}\\fP(3)" for s in see) +
                 (", " if see else "") + "\\fBdlock\\fP(1)")
    return "\n".join(lines) + "\n"


def generate(headers_dir, out_dir, version):
    os.makedirs(out_dir, exist_ok=True)
    errors = error_table(headers_dir)
    names = []
    for call in calls(headers_dir):
        with open(os.path.join(out_dir, call[0] + ".3"), "w",
                  encoding="utf-8") as f:
            f.write(page(call, errors, version))
        names.append(call[0])
    return names


def exported(library):
    out = subprocess.run(["nm", "-D", "--defined-only", library],
                         capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines()
            if re.search(r" T dlock_\w+", line)}


def check(headers_dir, library):
    with tempfile.TemporaryDirectory() as d:
        pages = set(generate(headers_dir, d, "check"))
        symbols = exported(library)
        bad = 0
        for s in sorted(symbols - pages):
            print(f"manpages: {s} is exported but has no page")
            bad += 1
        for p in sorted(pages - symbols):
            print(f"manpages: {p}.3 names no exported symbol")
            bad += 1
        for p in sorted(pages):
            r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z",
                                os.path.join(d, p + ".3")],
                               capture_output=True, text=True)
            if r.returncode != 0 or r.stderr.strip():
                print(f"manpages: {p}.3 does not render cleanly: "
                      f"{r.stderr.strip()[:300]}")
                bad += 1
        print(f"manpages: {len(pages)} pages, {len(symbols)} exported calls, "
              f"{bad} problems")
        return 1 if bad else 0


def main(argv):
    if len(argv) == 4 and argv[2] == "--check":
        return check(argv[1], argv[3])
    if len(argv) == 5 and argv[2] == "--install": # meson's install script
        root = os.environ.get("MESON_INSTALL_DESTDIR_PREFIX", "")
        generate(argv[1], os.path.join(root, argv[3], "man3"), argv[4])
        return 0
    if len(argv) == 4:
        generate(argv[1], argv[2], argv[3])
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
