#!/usr/bin/env python3
"""Section 3 man pages for every public call, from the public headers.

Each call's page is made from its header: the comment above its
declaration (what it does, its arguments, its errors), the declaration
itself, the header's "Thread-safety:" paragraph, and the meaning of every
error code the comment names (from error.h's table). The headers are where
a call is documented for C programmers already; generating the pages from
them keeps one text, reviewed with the code, instead of two that drift.

  tools/manpages.py HEADERS_DIR OUT_DIR VERSION     write OUT_DIR/NAME.3
  tools/manpages.py HEADERS_DIR --install MANDIR VERSION DOCDIR   the same
        into meson's install (MANDIR/man3 under MESON_INSTALL_DESTDIR_PREFIX),
        the pages pointing at the docs in DOCDIR
  tools/manpages.py HEADERS_DIR --returns FILE   every "CALL CODE" line of
        FILE (the codes the suites saw each call return) is a code the
        call's page lists under RETURN VALUE
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
    prev = None
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
            out.append((m.group(2), h, ret, params, comment, safety, prev))
            prev = m.group(2)
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


# NAME lines a call's first sentence cannot give whole (too long without
# its parentheses, or not a sentence alone): one short sentence each.
NAMES = {
    "dlock_acquire": "Acquire the lock, waiting up to wait_ms",
    "dlock_interrupt_owner": "Interrupt every wait of one owner in this process",
    "dlock_lock_bind_owner": "Bind a lock handle to an explicit owner id",
    "dlock_write_lock_new": "Make the write half of a read-write lock",
    "dlock_latch_free": "Free a latch handle",
    "dlock_semaphore_free": "Free a semaphore handle",
    "dlock_permits_free": "Free an expirable-permit semaphore handle",
    "dlock_semaphore_try_set_permits": "Set a semaphore's permits if not set yet",
    "dlock_permits_try_set_permits": "Set an expirable-permit semaphore's total if not set yet",
    "dlock_semaphore_lock_new": "Make a lock that takes one expirable permit",
    "dlock_guarded_call": "Run one write command only while the lock is held",
    "dlock_guarded_eval": "Run a Lua body only while the lock is held",
    "dlock_fenced_call": "Run one write command guarded by a fencing token alone",
    "dlock_list": "List the names of locks, latches and semaphores by pattern",
    "dlock_watcher_new": "Start watching a name for changes",
    "dlock_acquire_async": "Start an acquire without blocking",
    "dlock_latch_get_count_async": "Read a latch's count without blocking",
    "dlock_latch_try_set_count_async": "Set a latch's count without blocking",
    "dlock_semaphore_release_async": "Release semaphore permits without blocking",
    "dlock_strerror": "Short constant text for an error code",
    "dlock_election_campaign": "Campaign to lead an election, waiting up to wait_ms",
    "dlock_election_campaign_async": "Campaign to lead an election without blocking",
}


def strip_parens(text):
    """text without its (balanced) parenthesised asides."""
    before = None
    while before != text:
        before = text
        text = re.sub(r"\s*\([^()]*\)", "", text)
    return text


def short(name, comment):
    """The page's NAME line: one short whole sentence. The comment's first
    sentence without its parenthesised asides, or its part before a colon
    when that alone is a clause; NAMES where neither is whole or short."""
    if name in NAMES:
        return NAMES[name]
    text = re.sub(r"\be\.g\.", "e_g_", " ".join(comment.split()))
    first = re.split(r"(?<=\.)\s", text, maxsplit=1)[0].rstrip(".")
    first = strip_parens(first.replace("e_g_", "e.g."))
    if len(first) > 80:
        head = first.split(": ", 1)[0]
        if len(head.split()) >= 3:
            first = head
    return first


def name_problem(name, line):
    """Why a NAME line is not one short whole sentence, or None."""
    if not line:
        return "is empty"
    if len(line) > 80:
        return f"is {len(line)} characters (80 at most)"
    if line.count("(") != line.count(")"):
        return "is cut inside a parenthesis"
    if re.match(r"(The same|As dlock_|As )", line):
        return "is not a sentence alone (it points at another call)"
    if re.search(r"\b(and|or|the|a|of|to|with|e\.g)$", line):
        return "is cut mid-sentence"
    return None


# The codes of every call that talks to the server, whatever it does: the
# connection, the reply, the server's refusals, the client's settings.
SERVER_CODES = ("DLOCK_EIO", "DLOCK_EPROTO", "DLOCK_EREDIS", "DLOCK_EAUTH",
                "DLOCK_EPERM", "DLOCK_ETLS", "DLOCK_ECONFIG", "DLOCK_ECLOSED",
                "DLOCK_ENOMEM")
# int calls that never reach the server (a handle made, an id, a wait woken,
# a text checked): their pages list only the codes their comments name
LOCAL = re.compile(r"^dlock_(\w+_lock_new|\w+lock_new|rwlock_new|latch_new|"
                   r"semaphore_new|permits_new|election_new|group_lock_new|"
                   r"multi_lock_new|redlock_new|\w*interrupt\w*|lock_bind_owner|"
                   r"uri_\w+|client_stats\w*|client_completion_fd|"
                   r"client_run_completions|cancel|owner_id_new|thread_id|"
                   r"errname|strerror|errmsg|leader_clear|reply_free|"
                   r"inspection_free|lock_caps|lock_kind|lock_name)$")
# "As dlock_x", "as for dlock_x()", "dlock_x() that ...", "dlock_x()
# without blocking": the codes of the call it points at
POINTS = re.compile(r"(?:^|\b[Aa]s (?:for |in |with )?|^)(dlock_\w+)(?:\(\))?"
                    r"(?= that|\(\) without blocking| without blocking|[:;,.]| otherwise| \()")


def named_codes(comment, errors):
    return [e for e in dict.fromkeys(re.findall(r"\bDLOCK_E[A-Z]+\b", comment))
            if e in errors]


def return_codes(call, by_name, errors, seen=None):
    """Every code call can return: the ones its comment names, those of a
    call it is said to be like, and the server's for a call that reaches
    it."""
    name, _, ret, _, comment = call[:5]
    seen = seen or set()
    seen.add(name)
    codes = named_codes(comment, errors)
    for other in re.findall(r"\b(dlock_\w+)(?:\(\)|\b)", comment[:400]):
        like = re.search(r"(\b[Aa]s (?:for |in )?|^|[Tt]he same as )" + other + r"\b", comment)
        if other in by_name and other not in seen and (like or "The same" in comment):
            codes += return_codes(by_name[other], by_name, errors, seen)
    # "Try once: dlock_acquire(lock, 0, lease_ms)": that call, so called
    for other in re.findall(r": (dlock_\w+)\(\w", comment[:200]):
        if other in by_name and other not in seen:
            codes += return_codes(by_name[other], by_name, errors, seen)
    # a call that starts without blocking checks its arguments first
    if name.endswith("_async"):
        codes.append("DLOCK_EINVAL")
    if comment.startswith("The same") and call[6] and call[6] not in seen:
        codes += return_codes(by_name[call[6]], by_name, errors, seen)
    if ret == "int": # every call checks its arguments (NULL, ranges)
        codes.append("DLOCK_EINVAL")
    if ret == "int" and not LOCAL.match(name):
        codes += SERVER_CODES
        # a call on a name: the name may hold another kind of object
        if re.search(r"\bdlock_(lock|latch|semaphore|permits|election|rwlock)"
                     r" \*|const char \*name\b", call[3]):
            codes.append("DLOCK_EKIND")
    return list(dict.fromkeys(codes))


def page(call, errors, version, by_name):
    name, header, ret, params, comment, safety = call[:6]
    summary = short(name, comment)
    lines = [f'.TH {name.upper()} 3 "" "dlock {version}" "dlock manual"',
             ".SH NAME", f"{name} \\- {roff(summary)}",
             ".SH SYNOPSIS", ".nf", f".B #include <dlock/{header}>", ".PP",
             roff(f"{ret} {name}({params});"), ".fi", ".PP",
             "Link with \\fB\\-ldlock\\fP (\\fBpkg\\-config \\-\\-libs dlock\\fP).",
             ".SH DESCRIPTION", paragraphs(comment) or ".PP\nSee " + header + "."]
    codes = return_codes(call, by_name, errors)
    lines.append(".SH RETURN VALUE")
    if ret == "int" and codes:
        lines.append(".PP\n\\fBDLOCK_OK\\fP (0) on success, else one of the "
                     "codes below; \\fBdlock_errmsg\\fP(3) then says why in "
                     "words (\\fBdlock\\fP(7) lists every code).")
        for e in sorted(codes, key=lambda e: -errors[e][0]):
            num, text = errors[e]
            lines.append(f".TP\n.B {e}\n({num}) {roff(text)}")
    elif ret == "int":
        lines.append(".PP\nAs the description says.")
    else:
        lines.append(".PP\nAs the description says; it cannot fail.")
    lines += [".SH THREAD SAFETY", ".PP", roff(safety[:1].upper() + safety[1:])]
    if name in EXAMPLES:
        lines += [".SH EXAMPLE", ".EX", roff(EXAMPLES[name]), ".EE"]
    see = [s for s in dict.fromkeys(re.findall(r"\b(dlock_\w+)\(\)", comment))
           if s != name]
    if ret == "int" and "dlock_errmsg" not in see and name != "dlock_errmsg":
        see.append("dlock_errmsg")
    lines.append(".SH SEE ALSO")
    lines.append(", ".join(f"\\fB{s}\\fP(3)" for s in see) +
                 (", " if see else "") + "\\fBdlock\\fP(7), \\fBdlock\\fP(1)")
    text = "\n".join(lines) + "\n"
    return text.replace("docs/", DOCDIR + "/")


# Where the pages say the docs are (set by --install from meson's docdir)
DOCDIR = "/usr/share/doc/libdlock-dev"


def generate(headers_dir, out_dir, version):
    os.makedirs(out_dir, exist_ok=True)
    errors = error_table(headers_dir)
    every = calls(headers_dir)
    by_name = {c[0]: c for c in every}
    names = []
    for call in every:
        with open(os.path.join(out_dir, call[0] + ".3"), "w",
                  encoding="utf-8") as f:
            f.write(page(call, errors, version, by_name))
        names.append(call[0])
    return names


def returns(headers_dir, seen_file):
    """Each "CALL DLOCK_EXXX" line of seen_file (codes the test suites saw
    a call return) is among the codes the call's page lists: 0, else 1 with
    every one missing."""
    errors = error_table(headers_dir)
    every = calls(headers_dir)
    by_name = {c[0]: c for c in every}
    bad = 0
    for line in open(seen_file, encoding="utf-8"):
        words = line.split()
        if len(words) != 2 or words[0] not in by_name:
            continue
        call, code = words
        if code not in return_codes(by_name[call], by_name, errors):
            print(f"manpages: {call} returned {code}, which its page "
                  f"(its comment in dlock/{by_name[call][1]}) does not name")
            bad += 1
    return 1 if bad else 0


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
        for c in calls(headers_dir):
            why = name_problem(c[0], short(c[0], c[4]))
            if why:
                print(f"manpages: {c[0]}'s NAME line {why}: "
                      f"\"{short(c[0], c[4])}\"")
                bad += 1
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
        # dlock(7), the overview: every code of error.h, rendered cleanly
        seven = os.path.join(headers_dir, "..", "..", "docs", "dlock.7")
        text = open(seven, encoding="utf-8").read()
        for e in error_table(headers_dir):
            if f".B {e}\n" not in text:
                print(f"manpages: dlock.7 does not list {e}")
                bad += 1
        for p in [seven, os.path.join(headers_dir, "..", "..", "docs", "dlock.1")]:
            r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", p],
                               capture_output=True, text=True)
            if r.returncode != 0 or r.stderr.strip():
                print(f"manpages: {os.path.basename(p)} does not render "
                      f"cleanly: {r.stderr.strip()[:300]}")
                bad += 1
        print(f"manpages: {len(pages)} pages, {len(symbols)} exported calls, "
              f"{bad} problems")
        return 1 if bad else 0


def main(argv):
    if len(argv) == 4 and argv[2] == "--check":
        return check(argv[1], argv[3])
    if len(argv) == 4 and argv[2] == "--returns":
        return returns(argv[1], argv[3])
    if len(argv) == 6 and argv[2] == "--install": # meson's install script
        global DOCDIR
        root = os.environ.get("MESON_INSTALL_DESTDIR_PREFIX", "")
        DOCDIR = argv[5]
        generate(argv[1], os.path.join(root, argv[3], "man3"), argv[4])
        return 0
    if len(argv) == 4:
        generate(argv[1], argv[2], argv[3])
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
