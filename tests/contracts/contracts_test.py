#!/usr/bin/env python3
"""Contracts stated in more than one place say the same thing.

    contracts_test.py <Case> <source dir>

Each contract has one source of truth, and each case fails, naming the
places that disagree, when another place says something else:

  the invariants      docs/DESIGN.md section 8 (its table), against the
                      names check.cc reports, the header's list, shmsem(7),
                      shmsem_check(3) and every INV-* name used anywhere
  the layout version  kLayoutVersion (libshmsem/src), against the docs that
                      state the current version
  the source files    the tree, against the files DESIGN.md and README.md name
  the SPIN models     verify/MODEL.md names the commit and layout version
                      the models match; the commit must be in the history
  the errors          the public headers, against each man page's ERRORS

Nothing here runs the library. Exits 77 to skip (ctest SKIP_RETURN_CODE).
"""
import glob
import os
import re
import subprocess
import sys

SKIP = 77
SRC = None  # the source tree, from the command line


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(SKIP)


def path(rel):
    return os.path.join(SRC, rel)


def read(rel):
    with open(path(rel), encoding="utf-8", errors="replace") as f:
        return f.read()


def words(text):
    """Whitespace collapsed, so that line breaks do not count."""
    return " ".join(text.split())


INV_NAME = r"INV-[A-Z]+(?:-[A-Z]+)*"
# What the docs and comments write for "an invariant's name", not one.
INV_PLACEHOLDERS = {"INV-NAME"}


def strip_c_comments(text):
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)


# --- the library's own sources (read only: files move while others work) --

def layout_version():
    found = {}
    for f in glob.glob(path("libshmsem/src/**/*"), recursive=True):
        if not f.endswith((".h", ".cc")):
            continue
        with open(f, encoding="utf-8", errors="replace") as fh:
            for m in re.finditer(r"\bkLayoutVersion\s*=\s*(\d+)", fh.read()):
                found.setdefault(int(m.group(1)), []).append(os.path.relpath(f, SRC))
    if len(found) != 1:
        fail("expected one definition of kLayoutVersion under libshmsem/src, found %r" % found)
    return next(iter(found))


def checker_names():
    """The INV-* names the checker reports: those that open a string
    literal ("INV-QUEUE: ..." or a table's "INV-QUEUE") in the code (not
    the comments) of the checker's files, wherever the structure change
    puts them."""
    files = sorted(f for f in glob.glob(path("libshmsem/src/**/*check*.cc"), recursive=True))
    if not files:
        fail("no checker (*check*.cc) under libshmsem/src")
    names = set()
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            names |= set(re.findall(r'"(' + INV_NAME + r')', strip_c_comments(fh.read())))
    if not names:
        fail("no \"INV-...\" string in %s" % ", ".join(os.path.relpath(f, SRC) for f in files))
    return names, [os.path.relpath(f, SRC) for f in files]


# --- docs/DESIGN.md section 8 -----------------------------------------------

def design_invariants():
    """[(name, short, checked_by)] from the table, and the names of the
    "In full" bullets, of the section titled Invariants."""
    text = read("docs/DESIGN.md")
    m = re.search(r"^## [^\n]*Invariants[^\n]*\n(.*?)(?=^## )", text, re.M | re.S)
    if not m:
        fail("docs/DESIGN.md has no '## ... Invariants' section")
    section = m.group(1)
    rows = []
    for line in section.splitlines():
        r = re.match(r"^\|\s*(" + INV_NAME + r")\s*\|(.*)\|\s*$", line)
        if r:
            cells = [c.strip() for c in r.group(2).split("|")]
            if len(cells) != 2:
                fail("DESIGN.md table row of %s has %d cells, expected 3" % (r.group(1), len(cells) + 1))
            rows.append((r.group(1), cells[0], cells[1]))
    if not rows:
        fail("no table of invariants in DESIGN.md's Invariants section")
    names = [r[0] for r in rows]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        fail("DESIGN.md's table names %s twice" % ", ".join(dups))
    bullets = re.findall(r"^\* \*\*(" + INV_NAME + r")\*\*", section, re.M)
    return rows, bullets


# --- roff ------------------------------------------------------------------

FONT_ALTERNATING = {"BR", "RB", "IR", "RI", "BI", "IB"}


def roff_args(rest):
    return [a if a is not None and a != "" else b
            for a, b in re.findall(r'"((?:[^"]|"")*)"|(\S+)', rest)]


def roff_unescape(s):
    s = re.sub(r"\\f(?:\[[^\]]*\]|\(..|.)", "", s)
    s = s.replace("\\-", "-").replace("\\(aq", "'").replace("\\(bu", "*")
    s = s.replace("\\~", " ").replace("\\&", "").replace("\\e", "\\")
    return s


def roff_text(lines):
    """The words of roff source lines (font macros kept as text, other
    requests dropped), escapes resolved, whitespace collapsed."""
    out = []
    for line in lines:
        if line.startswith((".", "'")):
            m = re.match(r"^[.'](\S+)\s*(.*)$", line)
            if not m:
                continue
            macro, rest = m.group(1), m.group(2)
            if macro in ("B", "I"):
                out.append(" ".join(roff_args(rest)))
            elif macro in FONT_ALTERNATING:
                out.append("".join(roff_args(rest)))
            continue
        out.append(line)
    return words(roff_unescape(" ".join(out)))


def man_sections(text):
    """{section name: [lines]} of a man page."""
    sections, name = {}, None
    for line in text.splitlines():
        m = re.match(r'^\.SH\s+"?([^"]*)"?\s*$', line)
        if m:
            name = m.group(1).strip()
            sections[name] = []
        elif name is not None:
            sections[name].append(line)
    return sections


def man_pages():
    """{page file: text} of the section-3 pages that are pages, not links."""
    pages = {}
    for f in sorted(glob.glob(path("man/*.3"))):
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        if not re.match(r"^\.so\s", text):
            pages[os.path.basename(f)] = text
    return pages


def man_page_functions(text):
    name = roff_text(man_sections(text).get("NAME", []))
    return re.findall(r"\b(shmsem_\w+)\b", name.split(" - ")[0])


def man_blocks(lines):
    """Paragraphs of a section: ('tp', tag line, body) or ('text', lines)."""
    blocks, cur = [], None
    i = 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"^\.(TP)\b", line):
            tag = lines[i + 1] if i + 1 < len(lines) else ""
            cur = ["tp", tag, []]
            blocks.append(cur)
            i += 2
            continue
        if re.match(r"^\.(PP|LP|P)\b", line):
            cur = ["text", []]
            blocks.append(cur)
            i += 1
            continue
        if cur is None:
            cur = ["text", []]
            blocks.append(cur)
        (cur[2] if cur[0] == "tp" else cur[1]).append(line)
        i += 1
    return blocks


# --- C headers -------------------------------------------------------------

def header_items(text):
    """The header as items: ('comment', text), ('pp', text), ('func', name,
    return type, parameters), ('code', text)."""
    items, i, n = [], 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        if text.startswith("/*", i):
            j = text.index("*/", i + 2) + 2
            items.append(("comment", text[i:j]))
            i = j
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            items.append(("comment", text[i:j]))
            i = j
            continue
        if text[i] == "#":
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0:
                    k = n
                    break
                if text[k - 1] != "\\":
                    break
                j = k + 1
            items.append(("pp", text[i:k]))
            i = k
            continue
        # Code up to ';' at depth 0, or to the '}' that closes a function body.
        j, depth, start = i, 0, i
        body = False
        while j < n:
            c = text[j]
            if text.startswith("/*", j):
                j = text.index("*/", j + 2) + 2
                continue
            if text.startswith("//", j):
                j = text.find("\n", j)
                continue
            if c in "\"'":
                k = j + 1
                while k < n and text[k] != c:
                    k += 2 if text[k] == "\\" else 1
                j = k + 1
                continue
            if c == "\n" and depth > 0 and text[j + 1:].lstrip(" \t").startswith("#"):
                j = text.find("\n", j + 1)
                j = n if j < 0 else j
                continue
            if c == "{":
                if depth == 0 and re.fullmatch(r'extern\s+"C"\s*', text[start:j]):
                    break
                if depth == 0 and text[start:j].rstrip().endswith(")"):
                    body = True
                depth += 1
            elif c == "}":
                if depth == 0:
                    break  # closes extern "C"
                depth -= 1
                if depth == 0 and body:
                    j += 1
                    break
            elif c == ";" and depth == 0:
                j += 1
                break
            j += 1
        code = text[start:j]
        i = j + 1 if j < n and text[j] in "{}" and not code.strip().endswith("}") else j
        if i == start:
            i += 1
        sig = words(re.sub(r"/\*.*?\*/", " ", code.split("{")[0], flags=re.S))
        m = re.match(r"^(?:static\s+inline\s+)?(.+?)\b(shmsem_\w+)\s*\((.*)\)\s*;?$", sig)
        if m and "(" not in m.group(1) and "typedef" not in m.group(1):
            items.append(("func", m.group(2), m.group(1).strip(), m.group(3)))
        else:
            items.append(("code", code))
    return items


PUBLIC_HEADERS = ["libshmsem/include/shmsem/shmsem.h", "libshmsem/include/shmsem/inspect.h",
                  "libshmsem/include/shmsem/uring.h"]


def header_functions():
    """{name: (header, return type, has a pointer parameter, doc comment)}."""
    funcs = {}
    for h in PUBLIC_HEADERS:
        items = header_items(read(h))
        for k, it in enumerate(items):
            if it[0] != "func":
                continue
            doc = ""
            for prev in reversed(items[:k]):
                if prev[0] in ("pp", "func"):
                    continue
                if prev[0] == "comment":
                    doc = prev[1]
                break
            doc = words(re.sub(r"^\s*\*", " ", re.sub(r"^/\*|\*/$", "", doc), flags=re.M))
            funcs[it[1]] = (h, it[2], "*" in it[3], doc)
    return funcs


ERRNO = r"-E[A-Z0-9]+"
REF = r"(?:those|errors) of\s+(the call without _n|shmsem_\w+)"


def header_errors(funcs):
    """{function returning int: set of errors}, as its header documents
    them: the codes of its doc comment from "Errors:" on (else from
    "Returns", else all of it), the errors of the functions it names ("those of
    shmsem_x", "the call without _n"), and -EINVAL for a NULL pointer where
    the header's banner says so for every function."""
    banner_null = {}
    for h in PUBLIC_HEADERS:
        banner_null[h] = bool(re.search(r"NULL[^.]*is -EINVAL for every function", words(read(h))))
    direct, refs = {}, {}
    for name, (h, ret, has_ptr, doc) in funcs.items():
        if ret != "int":
            continue
        m = re.search(r"Errors:", doc) or re.search(r"\bReturns\b", doc)
        region = doc[m.start():] if m else doc
        codes = set(re.findall(ERRNO, region))
        if banner_null[h] and has_ptr:
            codes.add("-EINVAL")
        direct[name] = codes
        refs[name] = []
        for r in re.findall(REF, region):
            if r == "the call without _n":
                if not name.endswith("_n"):
                    fail("%s: %s says 'the call without _n'" % (h, name))
                r = name[:-2]
            refs[name].append(r)
    return resolve(direct, refs, "the headers")


def resolve(direct, refs, where):
    out = {}

    def errs(f, seen):
        if f in out:
            return out[f]
        if f not in direct:
            fail("%s refer to the errors of %s, which they do not document" % (where, f))
        if f in seen:
            fail("%s: the errors of %s refer to themselves" % (where, f))
        s = set(direct[f])
        for r in refs[f]:
            s |= errs(r, seen | {f})
        out[f] = s
        return s

    for f in direct:
        errs(f, frozenset())
    return out


def man_errors(int_funcs):
    """{(page, function): set of errors} from each page's ERRORS section,
    and {function: its own page}. A paragraph "f(), g():" scopes what
    follows to those functions (else the page's NAME functions); the codes
    are the tags of .TP entries, and those of a paragraph that refers to
    other functions' errors ("those of f(3)"), which it adds; "... is -EINVAL
    for every function" adds to every function of the page."""
    pages = man_pages()
    direct, refs, own = {}, {}, {}
    for page, text in pages.items():
        funcs = [f for f in man_page_functions(text) if f in int_funcs]
        for f in funcs:
            if page == f + ".3" or f not in own:
                own[f] = page
        sections = man_sections(text)
        if not funcs:
            continue
        if "ERRORS" not in sections:
            continue
        scope = list(funcs)
        for f in funcs:
            direct[(page, f)] = set()
            refs[(page, f)] = []
        for b in man_blocks(sections["ERRORS"]):
            if b[0] == "tp":
                for f in scope:
                    direct[(page, f)] |= set(re.findall(ERRNO, roff_text([b[1]])))
                continue
            t = roff_text(b[1])
            if not t:
                continue
            m = re.match(r"^((?:\(?shmsem_\w+\(\)\)?(?:,|\s+and)?\s*)+):\s*(.*)$", t)
            if m:
                scope = [f for f in re.findall(r"(shmsem_\w+)\(\)", m.group(1)) if f in funcs]
                if not scope:
                    fail("man/%s ERRORS: '%s' names no function of the page" % (page, m.group(1)))
                t = m.group(2)
            if re.search(r"is " + ERRNO + r" for every function", t):
                for f in funcs:
                    direct[(page, f)] |= set(re.findall(r"is (" + ERRNO + r") for every function", t))
                continue
            found = re.findall(REF, t, re.I)
            if not found:
                continue
            for f in scope:
                direct[(page, f)] |= set(re.findall(ERRNO, t))
                for r in found:
                    if r.lower() == "the call without _n":
                        if not f.endswith("_n"):
                            fail("man/%s: %s says 'the call without _n'" % (page, f))
                        r = f[:-2]
                    refs[(page, f)].append(r)
    # A reference names a function: its own page's entry.
    keyed_direct = dict(direct)
    keyed_refs = {k: [(own.get(r, "?"), r) for r in v] for k, v in refs.items()}
    return resolve(keyed_direct, keyed_refs, "man pages' ERRORS sections"), own


# --- the cases -------------------------------------------------------------

def InvariantNamesAgreeWithTheChecker():
    """DESIGN's table (the rows checked by shmsem_check), the header's list,
    shmsem_check(3) and the names check.cc reports are one set."""
    checked, files = checker_names()
    rows, _ = design_invariants()
    design = {n for n, _, by in rows if "shmsem_check" in by}
    funcs = header_functions()
    if "shmsem_check" not in funcs:
        fail("no shmsem_check in the public headers")
    header = set(re.findall(INV_NAME, funcs["shmsem_check"][3]))
    page = man_sections(read("man/shmsem_check.3"))
    man = set()
    for b in man_blocks(page.get("DESCRIPTION", [])):
        if b[0] == "tp":
            man |= set(re.findall(INV_NAME, roff_text([b[1]])))
    places = [("the checker (%s)" % ", ".join(files), checked),
              ("docs/DESIGN.md's table (checked by shmsem_check)", design),
              ("shmsem.h's comment of shmsem_check", header),
              ("man/shmsem_check.3 DESCRIPTION", man)]
    bad = False
    for where, names in places[1:]:
        if names != checked:
            bad = True
            print("%s: %d names; missing %s; not checked: %s" % (
                where, len(names), sorted(checked - names) or "none",
                sorted(names - checked) or "none"), file=sys.stderr)
    if bad:
        fail("the invariants named differ from the %d the checker reports: %s" % (
            len(checked), ", ".join(sorted(checked))))
    print("%d invariants, the same in the checker, DESIGN.md, the header and shmsem_check(3)"
          % len(checked))


def InvariantsAreStatedOnceInDesign():
    """Every INV-* name used anywhere is a row of DESIGN's table; the table
    and its "In full" list have the same names; the models column names
    exactly the verify/*.pml files that assert the invariant; and
    shmsem_check(3) gives the table's short form word for word."""
    rows, bullets = design_invariants()
    table = [n for n, _, _ in rows]
    if sorted(table) != sorted(bullets):
        fail("DESIGN.md section 8: the table has %s, the 'In full' list %s" % (
            sorted(set(table) - set(bullets)) or "nothing more",
            sorted(set(bullets) - set(table)) or "nothing more"))
    used = {}
    roots = ["README.md", "docs", "man", "libshmsem", "tests", "verify", "examples", "tools", "bench"]
    for root in roots:
        for f in glob.glob(path(root + "/**/*"), recursive=True):
            rel = os.path.relpath(f, SRC)
            if (not os.path.isfile(f) or rel == "docs/CHANGES.md" or "/fuzz/regressions/" in f
                    or rel.startswith("tests/contracts/")):
                continue
            try:
                with open(f, encoding="utf-8") as fh:
                    text = fh.read().replace("\\-", "-")
            except (UnicodeDecodeError, OSError):
                continue
            for n in set(re.findall(INV_NAME, text)) - INV_PLACEHOLDERS:
                used.setdefault(n, []).append(rel)
    unknown = {n: fs for n, fs in used.items() if n not in table}
    if unknown:
        fail("invariants used but not in DESIGN.md's table: " + "; ".join(
            "%s (%s)" % (n, ", ".join(sorted(fs)[:4])) for n, fs in sorted(unknown.items())))
    models = {}
    for f in sorted(glob.glob(path("verify/*.pml"))):
        with open(f, encoding="utf-8") as fh:
            for n in set(re.findall(INV_NAME, fh.read())):
                models.setdefault(n, set()).add(os.path.basename(f))
    for n, _, by in rows:
        said = set(re.findall(r"\b(\w+\.pml)\b", by))
        if said != models.get(n, set()):
            fail("DESIGN.md says %s is checked by the models %s, but %s assert it" % (
                n, sorted(said) or "none", sorted(models.get(n, set())) or "none"))
    short = {n: s for n, s, by in rows}
    page = man_sections(read("man/shmsem_check.3"))
    for b in man_blocks(page.get("DESCRIPTION", [])):
        if b[0] != "tp":
            continue
        for n in re.findall(INV_NAME, roff_text([b[1]])):
            if n in short and roff_text(b[2]) != words(short[n]):
                fail("%s: shmsem_check(3) says\n  %s\nDESIGN.md's table says\n  %s" % (
                    n, roff_text(b[2]), words(short[n])))
    print("%d invariants in DESIGN.md's table; %d names used in the tree, all in it"
          % (len(table), len(used)))


def PermitsInvariantReadsTheSameEverywhere():
    """available + held + reserved = X: X is DESIGN's, wherever it is said."""
    rows, _ = design_invariants()
    permits = [s for n, s, _ in rows if n == "INV-PERMITS"]
    if not permits:
        fail("DESIGN.md's table has no INV-PERMITS")
    formula = r"available\s*\+\s*held\s*\+\s*reserved\s*==?\s*(\w+(?:\s*[+-]\s*\w+)*)"
    m = re.search(formula, permits[0])
    if not m:
        fail("DESIGN.md's INV-PERMITS does not say available + held + reserved = ...")
    truth = words(m.group(1))
    files = ["README.md"] + sorted(os.path.relpath(f, SRC) for f in glob.glob(path("docs/*.md")))
    files += sorted(os.path.relpath(f, SRC) for f in glob.glob(path("man/*.[137]")))
    files += sorted(os.path.relpath(f, SRC) for f in glob.glob(path("libshmsem/include/shmsem/*.h")))
    bad, n = [], 0
    for rel in files:
        if rel == "docs/CHANGES.md":
            continue
        text = read(rel)
        if rel.startswith("man/"):
            text = roff_text(text.splitlines())
        else:
            text = words(re.sub(r"^\s*\*(?!\*)", " ", text, flags=re.M).replace("`", ""))
        for m in re.finditer(formula, text):
            n += 1
            if words(m.group(1)) != truth:
                bad.append("%s: ... = %s" % (rel, words(m.group(1))))
    if bad:
        fail("DESIGN.md says available + held + reserved = %s; elsewhere:\n  %s" % (
            truth, "\n  ".join(bad)))
    print("available + held + reserved = %s, said the same %d times" % (truth, n))


def DocsStateTheCurrentLayoutVersion():
    """DESIGN.md names only the current layout version (history is in
    CHANGES.md), and every statement of "this version" in the docs, the
    man pages and the headers is kLayoutVersion."""
    v = layout_version()
    bad = []
    design = words(read("docs/DESIGN.md"))
    for m in re.finditer(r"\blayout(?:[ _]version)?\W{0,3}(?:\(?(?:version|currently)\s+)?(\d+)\b",
                         design, re.I):
        if int(m.group(1)) != v:
            bad.append("docs/DESIGN.md: '%s'" % m.group(0))
    current = [r"\(currently\s+(\d+)\)", r"creates and opens layout version\s+(\d+)",
               r"this one's \(version\s+(\d+)\)"]
    files = ["README.md"] + [os.path.relpath(f, SRC) for f in glob.glob(path("docs/*.md"))]
    files += [os.path.relpath(f, SRC) for f in glob.glob(path("man/*.[137]"))]
    files += PUBLIC_HEADERS
    n = 0
    for rel in sorted(set(files) - {"docs/CHANGES.md"}):
        text = read(rel)
        text = roff_text(text.splitlines()) if rel.startswith("man/") else words(text)
        for pat in current:
            for m in re.finditer(pat, text):
                n += 1
                if int(m.group(1)) != v:
                    bad.append("%s: '%s'" % (rel, m.group(0)))
    if bad:
        fail("kLayoutVersion is %d; the docs say otherwise:\n  %s" % (v, "\n  ".join(bad)))
    print("layout version %d, stated as current %d times, and DESIGN.md names no other" % (v, n))


def DesignNamesFilesThatExist():
    """Every source file docs/DESIGN.md and README.md name (`lock.cc`,
    `census.h`, ...) is in the tree: a file renamed or removed leaves the
    design describing code that is not there."""
    tree = set()
    for root in ("libshmsem", "tools", "tests", "examples", "bench", "verify"):
        for f in glob.glob(path(root + "/**/*"), recursive=True):
            tree.add(os.path.basename(f))
    bad = []
    for rel in ("docs/DESIGN.md", "README.md"):
        named = set(re.findall(r"(?<![\w/.-])([A-Za-z_][\w-]*\.(?:cc|h|hpp|c|pml))\b", read(rel)))
        bad += ["%s: %s" % (rel, n) for n in sorted(named - tree)]
    if bad:
        fail("files named that are not in the tree:\n  " + "\n  ".join(bad))
    print("every source file DESIGN.md and README.md name is in the tree")


def git(*args):
    return subprocess.run(["git", "-C", SRC] + list(args), capture_output=True, text=True)


def model_statement():
    md = read("verify/MODEL.md")
    sec = re.search(r"^## What the models match\n(.*?)(?=^## )", md, re.M | re.S)
    if not sec:
        fail("verify/MODEL.md has no section '## What the models match'")
    found = re.findall(r"\bcommit ([0-9a-f]{7,40}), layout version (\d+)\b", sec.group(1))
    if len(found) != 1:
        fail("verify/MODEL.md, 'What the models match', must name one 'commit <hash>, "
             "layout version <n>' (found %d)" % len(found))
    return found[0][0], int(found[0][1])


def ModelsNameTheCommitAndLayoutTheyMatch():
    """MODEL.md names the commit and layout version the models match: the
    version is kLayoutVersion, no model's header comment names another,
    and (in a git checkout) the commit is an ancestor of HEAD whose
    kLayoutVersion was that version."""
    commit, named = model_statement()
    v = layout_version()
    if named != v:
        fail("verify/MODEL.md says the models match layout version %d; kLayoutVersion is %d: "
             "check the models against the new layout and name the commit checked" % (named, v))
    for f in sorted(glob.glob(path("verify/*.pml"))):
        with open(f, encoding="utf-8") as fh:
            head = re.match(r"\s*/\*.*?\*/", fh.read(), re.S)
        for m in re.finditer(r"\blayout(?: version)?\s+(\d+)", head.group(0) if head else "", re.I):
            if int(m.group(1)) != v:
                fail("%s's header comment names layout %s; kLayoutVersion is %d"
                     % (os.path.relpath(f, SRC), m.group(1), v))
    if git("rev-parse", "--is-inside-work-tree").stdout.strip() != "true":
        print("layout version %d as named; the commit part is skipped: %s is not a git "
              "checkout" % (v, SRC))
        return
    full = git("rev-parse", "--verify", "--quiet", commit + "^{commit}").stdout.strip()
    if not full:
        if git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
            print("layout version %d as named; the commit part is skipped: %s is not in "
                  "this shallow clone" % (v, commit))
            return
        fail("verify/MODEL.md names commit %s, which this repository does not have" % commit)
    if git("merge-base", "--is-ancestor", full, "HEAD").returncode != 0:
        fail("verify/MODEL.md names commit %s, which is not an ancestor of HEAD" % commit)
    at = git("grep", "-h", "-E", r"kLayoutVersion\s*=", full, "--", "libshmsem/src").stdout
    m = re.search(r"kLayoutVersion\s*=\s*(\d+)", at)
    if not m or int(m.group(1)) != named:
        fail("verify/MODEL.md names commit %s and layout version %d, but that commit has "
             "layout version %s" % (commit, named, m.group(1) if m else "none"))
    behind = git("rev-list", "--count", full + "..HEAD").stdout.strip()
    print("models match commit %s, layout version %d (an ancestor of HEAD, %s commits back)"
          % (commit, v, behind))


def identifiers(files, code_only):
    """The identifiers of C/C++ or Promela sources, outside comments and
    strings if code_only."""
    names = set()
    for f in files:
        if not os.path.isfile(f):
            continue
        with open(f, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        if code_only:
            text = re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', " ", text, flags=re.S)
        names |= set(re.findall(r"[A-Za-z_]\w*", text))
    return names


def ModelMapsNameFunctionsThatExist():
    """Every function the maps of verify/MODEL.md name on their C side
    (`name(...)` in a table's last column) is in the code of libshmsem/src
    (comments do not count: they outlive renames; a system call counts),
    and every other `name()` MODEL.md mentions is in libshmsem/src or in a
    model: a C function renamed or removed makes its map stale."""
    md = read("verify/MODEL.md")
    c_side = set()
    for sec in re.finditer(r"^#+ Map[^\n]*\n(.*?)(?=^#)", md, re.M | re.S):
        for line in sec.group(1).splitlines():
            cells = re.split(r"(?<!\\)\|", line)[1:-1]
            if len(cells) >= 2 and not line.startswith("|---"):
                c_side |= set(re.findall(r"`([A-Za-z_]\w*)\(", cells[-1]))
    if not c_side:
        fail("verify/MODEL.md has no '## Map' tables naming C functions")
    sources = glob.glob(path("libshmsem/src/**/*"), recursive=True)
    code = identifiers(sources, True)
    # A system call the code makes through syscall(2) counts as present.
    missing = sorted(n for n in c_side if n not in code and "SYS_" + n not in code)
    if missing:
        fail("verify/MODEL.md's maps name C functions that libshmsem/src no longer has "
             "(update the map, re-check the models, name the commit): " + ", ".join(missing))
    known = identifiers(sources + glob.glob(path("verify/*.pml")), False)
    others = set(re.findall(r"`([A-Za-z_]\w*)\(\)", md)) - c_side
    missing = sorted(others - known)
    if missing:
        fail("verify/MODEL.md names functions that are in neither libshmsem/src nor a model: "
             + ", ".join(missing))
    print("%d C functions in verify/MODEL.md's maps and %d other names, all found"
          % (len(c_side), len(others)))


def ManPageErrorsMatchTheHeaders():
    """For each function returning int: the errors its man page's ERRORS
    section lists are the errors its header comment documents."""
    funcs = header_functions()
    int_funcs = {f for f, v in funcs.items() if v[1] == "int"}
    header = header_errors(funcs)
    man, own = man_errors(int_funcs)
    bad = []
    for (page, f), errs in sorted(man.items()):
        if f not in header:
            continue
        if errs != header[f]:
            bad.append("%s in man/%s: %s; in %s: %s; only in the man page: %s; only in the "
                       "header: %s" % (f, page, " ".join(sorted(errs)), funcs[f][0],
                                       " ".join(sorted(header[f])),
                                       " ".join(sorted(errs - header[f])) or "none",
                                       " ".join(sorted(header[f] - errs)) or "none"))
    covered = {f for (_, f) in man}
    missing = sorted(int_funcs - covered)
    if missing:
        bad.append("no man page lists the errors of: " + ", ".join(missing))
    if bad:
        fail("man pages and headers document different errors:\n  " + "\n  ".join(bad))
    print("%d functions: the man pages' ERRORS match the headers" % len(covered))


CASES = [InvariantNamesAgreeWithTheChecker, InvariantsAreStatedOnceInDesign,
         PermitsInvariantReadsTheSameEverywhere, DocsStateTheCurrentLayoutVersion,
         DesignNamesFilesThatExist,
         ModelsNameTheCommitAndLayoutTheyMatch, ModelMapsNameFunctionsThatExist,
         ManPageErrorsMatchTheHeaders]


def main():
    global SRC
    if len(sys.argv) != 3:
        fail("usage: contracts_test.py <Case> <source dir>; cases: "
             + " ".join(c.__name__ for c in CASES))
    SRC = os.path.abspath(sys.argv[2])
    case = {c.__name__: c for c in CASES}.get(sys.argv[1])
    if case is None:
        fail("no test case " + sys.argv[1])
    case()
    print("PASS: " + sys.argv[1])


if __name__ == "__main__":
    main()
