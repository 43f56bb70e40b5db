#!/usr/bin/env python3
"""The design docs promise that every class and method they name exists under that name.

Checks each `Name` and `Name.member` in backticks of docs/architecture.md, control-protocol.md and
soft0-wire.md against the sources (main and test, samples, bench): a class name must be declared (class, interface, record,
enum, object, typealias) or imported, a member must appear as a word in some source file. Prints each name
that is missing and exits 1, so a rename that forgets the docs fails CI.
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
docs = [root / "docs" / n for n in ("architecture.md", "control-protocol.md", "soft0-wire.md")]
# Tests, samples and benchmarks too: the docs name the layer rules' test and the samples.
sources = [p for d in ("runtime", "dsl", "scripts", "samples", "bench") for p in (root / d / "src").rglob("*")
           if p.suffix in (".java", ".kt") and "target" not in p.parts]
file_names = {p.name for p in sources}
text = "\n".join(p.read_text(encoding="utf-8") for p in sources)
declared = set(re.findall(r"\b(?:class|interface|record|enum|object|typealias|@interface)\s+([A-Z][A-Za-z0-9_]*)", text))
# A library's class counts when the code imports it (the docs say which JDK or Agrona class is used).
declared |= set(re.findall(r"import\s+(?:static\s+)?[\w.]+?\.([A-Z]\w*)", text))
words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))

# `Type` or `Type.member` or `Type.member(...)`: a capitalised name that looks like code (CamelCase
# with a lower-case letter), not a constant, a file name or a C struct.
ref = re.compile(r"`([A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*)(?:\.([a-z][A-Za-z0-9_]*|[A-Z][A-Za-z0-9_]*))?(?:\([^`]*\))?`")
missing = []
for doc in docs:
    for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        for m in ref.finditer(line):
            cls, member = m.group(1), m.group(2)
            if member in ("kt", "java"):  # a file name: `Session.kt`
                if f"{cls}.{member}" not in file_names:
                    missing.append(f"{doc.relative_to(root)}:{n}: `{cls}.{member}`: no such source file")
                continue
            if line[:m.start()].endswith(("Agrona's ", "JDK's ")):
                continue  # a library's class named to say the code does not use it
            if cls not in declared:
                missing.append(f"{doc.relative_to(root)}:{n}: `{m.group(0)[1:-1]}`: no class {cls} in the sources")
            elif member and member not in words:
                missing.append(f"{doc.relative_to(root)}:{n}: `{m.group(0)[1:-1]}`: no {member} in the sources")
for line in missing:
    print(line)
if missing:
    print(f"docs-names: {len(missing)} names in the design docs are not in the code", file=sys.stderr)
    sys.exit(1)
print(f"docs-names: ok: every class and member the design docs name is in the code")
