"""The repository's shape, as the README describes it: the design card's eight files at the top,
everything else one folder away, no import cycles (not even through a `__main__` block or an import
inside a function), no file too long to read, and every citation resolving inside the repository.

Run: python -m pytest tests/test_layout.py -q
"""
import ast
import re

from conftest import REPO

READING_PATH = {"model", "sample", "logprob", "sft", "grpo", "rewards", "tasks", "eval"}
FOLDERS = ("taskdata", "modelio", "ops", "lab", "methods", "sandbox")
MAX_LINES = 450  # any .py outside tests/


def project_files():
    """{module name: path} for every .py of the project outside tests/."""
    files = {p.stem: p for p in REPO.glob("*.py")}
    for folder in FOLDERS:
        files.update({f"{folder}.{p.stem}": p for p in (REPO / folder).glob("*.py") if p.stem != "__init__"})
    return files


def imports_of(path, modules):
    """The project modules that `path` imports anywhere in the file (top level, functions, __main__)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from taskdata import parsers` and `from taskdata.parsers import x` import taskdata.parsers
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found |= {n for n in names if n in modules}
    return found


def test_top_level_is_the_reading_path():
    assert {p.stem for p in REPO.glob("*.py")} == READING_PATH
    for folder in FOLDERS:
        assert (REPO / folder / "__init__.py").exists(), f"{folder}/ must be a package (python -m {folder}.x)"


def test_no_import_cycles():
    files = project_files()
    graph = {m: imports_of(p, files) - {m} for m, p in files.items()}
    # depth-first search; a back edge is a cycle, reported as the path that closes it
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_the_trainers_do_not_import_the_evaluator():
    files = project_files()
    for trainer in ("grpo", "sft"):
        assert "eval" not in imports_of(files[trainer], files)


def test_no_file_is_too_long():
    long = {str(p.relative_to(REPO)): n for p in project_files().values()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}"


def test_citations_resolve_inside_the_repository():
    """No code, script or doc points outside the repository (../shared is the developers' reference
    shelf, not part of a clone), and every page of docs/ that is cited exists."""
    texts = [p for p in REPO.rglob("*") if p.suffix in (".py", ".md", ".sh") or p.name == "Makefile"]
    texts = [p for p in texts if not {".venv", "out", ".git"} & set(p.relative_to(REPO).parts)]
    # the two forbidden strings are built, not written, so this file passes its own check
    outside = ("shared" + "/docs", "d1" + "-spec")
    for p in texts:
        text = p.read_text()
        rel = p.relative_to(REPO)
        for bad in outside:
            assert bad not in text, f"{rel} cites {bad}, which is outside the repository"
        for doc in set(re.findall(r"docs/[\w.-]+\.md", text)):
            assert (REPO / doc).exists(), f"{rel} cites {doc}, which does not exist"
