#!/usr/bin/env python3
"""flag_check: no message outside src/cli/ names a command-line flag (docs/ARCHITECTURE.md, "The
command line"). Only src/cli/ knows flag names; a module says what is wrong in its own terms and
adds hw_option_hint(HW_OPTION_...), which the command line turns into " (--flag)" (include/hw/option.h).

Reads every C and CUDA source and header under src/ but src/cli/, drops comments (a comment may
name a flag: it is no message), and looks for "--name" or "--%..." in the string literals. The
flags of other programs that a module passes or suggests are allowed one by one, below.

    python3 tests/tools/flag_check.py [ROOT]     # make flag-check; exits 1 naming each hit
    python3 tests/tools/flag_check.py --self-test  # the checker on sources whose answer is known
"""
import os
import re
import sys

# Other programs' flags, each where it is allowed and why. A flag listed here that the file no
# longer uses is reported too, so that the list stays exact.
ALLOWED = {
    # the downloaders' own command lines (hw_download runs curl, else wget)
    "src/data/fetch.c": {"--fail", "--silent", "--show-error", "--location", "--connect-timeout", "--max-time",
                         "--output", "--no-verbose", "--tries", "--timeout", "--output-document"},
    # docker's option, in the advice for a too small /dev/shm
    "src/proc/shm.c": {"--shm-size"},
}

FLAG = re.compile(r"(?<![A-Za-z0-9_-])--(?:[a-z][a-z0-9-]*|%)")


def literals(text):
    """(line, contents) of each string literal of C source `text`, comments skipped."""
    out, i, line, n = [], 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            line += text.count("\n", i, end)
            i = end
        elif c in "\"'":
            j, start = i + 1, line
            while j < n and text[j] != c:
                if text[j] == "\\":
                    j += 1
                if j < n and text[j] == "\n":
                    line += 1
                j += 1
            if c == '"':
                out.append((start, text[i + 1:j]))
            i = j + 1
        else:
            i += 1
    return out


def flags_in(literal):
    """The flags a string literal names. An escape ("\\n--measure") is no part of a word."""
    return FLAG.findall(re.sub(r"\\.", " ", literal))


def self_test():
    """The checker on sources whose answer is known: what it must find, and what it must not."""
    source = r'''
// --lr in a comment is no message
/* nor "--lr" in this one */
int f(void) { return hw_fail("Try a lower --lr"); }               /* found: --lr */
int g(void) { return hw_fail("\n--measure: staleness"); }         /* found: --measure */
int h(void) { return hw_fail("--%s needs a value", name); }       /* found: --% */
int k(void) { char c = '"'; return hw_fail("p[--len] %c", c); }   /* found: --len, in a string */
int m(int n) { return n-- > 0 && --n; }                           /* code, not a string */
const char *ok = "a learning rate (--lr)" + 0;                    /* found: --lr */
const char *dash = "x -- y, a-b, --";                             /* no flag */
'''
    found = [flag for _, literal in literals(source) for flag in flags_in(literal)]
    want = ["--lr", "--measure", "--%", "--len", "--lr"]
    if found != want:
        print(f"flag-check --self-test: found {found}, expected {want}")
        return 1
    print("flag-check --self-test: passed")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    hits, used = [], {path: set() for path in ALLOWED}
    for folder, dirs, files in os.walk(os.path.join(root, "src")):
        dirs.sort()
        rel_folder = os.path.relpath(folder, root)
        if rel_folder == os.path.join("src", "cli") or rel_folder.startswith(os.path.join("src", "cli") + os.sep):
            continue
        for name in sorted(files):
            if not name.endswith((".c", ".h", ".cu", ".cuh")):
                continue
            path = os.path.join(rel_folder, name)
            with open(os.path.join(root, path), encoding="utf-8") as f:
                text = f.read()
            for line, literal in literals(text):
                for flag in flags_in(literal):
                    if flag in ALLOWED.get(path, ()):
                        used[path].add(flag)
                    else:
                        hits.append(f"{path}:{line}: {flag} in \"{literal}\"")
    stale = [f"{path}: allows {flag}, which it no longer uses" for path in ALLOWED
             for flag in sorted(ALLOWED[path] - used[path])]
    for problem in hits + stale:
        print(problem)
    if hits or stale:
        print(f"flag-check: {len(hits)} message(s) outside src/cli/ name a flag, {len(stale)} stale allowance(s): "
              "say it in the module's terms and add hw_option_hint (include/hw/option.h)")
        return 1
    print("flag-check: no message outside src/cli/ names a flag")
    return 0


if __name__ == "__main__":
    sys.exit(main())
