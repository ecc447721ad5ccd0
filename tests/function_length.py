#!/usr/bin/env python3
"""No function in lib/ or app/ is longer than 80 lines (a body from the line of its
opening brace to the line of its closing one, lambdas and local classes
inside it included): a reader finds each step of a long procedure under a
name. Comments and strings are blanked first so that their braces do not
count. Usage: function_length.py SOURCE_DIR"""
import glob
import os
import re
import sys

LIMIT = 80
SIGNATURE = re.compile(
    r"\)\s*(const)?\s*(noexcept)?\s*(override)?\s*(final)?\s*(->\s*[\w:<>]+)?\s*$"
    r"|\)\s*:\s*[\w:]+[({].*[)}]\s*$")  # a constructor's initialiser list
CONTROL = re.compile(r"\b(if|for|while|switch|catch)\s*\(")
LAMBDA = re.compile(r"\]\s*\(.*\)\s*(mutable)?\s*(->.*)?$")


def blank(text):
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r'R"\((.*?)\)"', lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])'", "''", text)


def long_functions(path):
    text = blank(open(path, encoding="utf-8").read())
    stack, line, last, found = [], 1, 0, []
    for i, ch in enumerate(text):
        if ch == "\n":
            line += 1
        elif ch == "{":
            head = " ".join(text[last:i].split())
            fn = (SIGNATURE.search(head) and not CONTROL.search(head.split(";")[-1])
                  and not LAMBDA.search(head) and not any(k == "fn" for k, _, _ in stack))
            stack.append(("fn" if fn else "block", line, head[-70:]))
            last = i + 1
        elif ch == "}":
            if stack:
                kind, start, head = stack.pop()
                if kind == "fn" and line - start + 1 > LIMIT:
                    found.append((path, start, line - start + 1, head))
            last = i + 1
        elif ch == ";":
            last = i + 1
    return found


def main():
    os.chdir(sys.argv[1])
    found = []
    for pattern in ("lib/**/*.cpp", "lib/**/*.h", "lib/**/*.cu", "lib/**/*.cuh", "app/*.cpp", "app/*.h"):
        for path in sorted(glob.glob(pattern, recursive=True)):
            found += long_functions(path)
    for path, start, n, head in found:
        print(f"FAIL: {path}:{start}: a function of {n} lines (at most {LIMIT}): ...{head}",
              file=sys.stderr)
    if not found:
        print(f"function length: no function in lib/ or app/ over {LIMIT} lines")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
