"""The repository's shape, as the README and docs/files.md describe it: the design card's eight files at
the top; at most six folders beside docs/ and tests/; the core (the eight and every repository module
they import, transitively: lab/closure.py) imports nothing of methods/ or lab/, and no line of the eight
names another method, model family or tool; the folders below the eight import none of them (but
model.py, and one named exception), methods/ builds on the core, nothing imports lab/; every import at
the top of its file and no import cycle; no file too long, the eight with room for a forker's change
and narrow enough to read; every citation resolving inside the repository.

Run: python -m pytest tests/test_layout.py -q
"""
import ast
import io
import re
import tokenize

import pytest

from conftest import REPO
from lab.closure import closure, outside_modules

READING_PATH = {"model", "sample", "logprob", "sft", "grpo", "rewards", "tasks", "eval"}
BELOW = ("modelio", "sandbox", "taskdata", "ops")  # what the eight call into: the core, with the eight
BESIDE = ("methods",)  # the field: builds on the core, runs through its own entry points
ABOVE = ("lab",)  # measures and studies the core and the field
FOLDERS = BELOW + BESIDE + ABOVE
GROUND = {"model"}  # the network: every layer runs it
# the one import from a folder below up into the eight files: d1's eval parsers reuse its training rewards
EXCEPTIONS = {("taskdata.parsers", "rewards")}
MAX_LINES = 450  # any .py outside tests/: the developers' budget
FORK_ROOM = 70  # each of the eight stays this far under MAX_LINES (<= 380): a forker's 60-line change fits
MAX_WIDTH = 100  # every line of the eight, as wide as nanoGPT's
WIDE = 95  # a line wider than this is wide; the eight together hold at most MAX_WIDE of them
MAX_WIDE = 40
# What the eight files never name (code, comments or docstrings): the field's methods, other model
# families, the tools that study them, the folders of the field and the lab. Case-sensitive, between
# non-alphanumerics (is_spg and Dream-7B count), so that "correspond" is no ESPO and "label." no lab.
NOT_D1 = ("Dream", "Qwen", "Fast-dLLM", "fast_dllm", "wd1", "JustGRPO", "justgrpo", "SPG", "spg", "ESPO", "espo",
          "d2", "TraceRL", "DiffuCoder", "trajectory", "trajectories", "Trajectory", "bench")
NOT_D1_RE = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(re.escape(w) for w in NOT_D1) + r")(?![A-Za-z0-9])"
                       r"|(?<![\w/.])(methods|lab)(/|\.(?=[A-Za-z_]))")
# file names that comments cite from other projects' code (d1's, LLaDA's, Dream's) or the standard
# library, and a usage example's placeholders: not files of this repository
EXTERNAL = {"train.py", "reward_func.py", "generation_utils.py", "get_log_likelihood.py", "modeling_dream.py",
            "configuration_dream.py", "modeling_llada.py", "configuration_llada.py", "tokenization_dream.py",
            "signal.py", "script.py", "x.py"}
# A number on this project's tracker ("issue 46", "#49"), which a clone cannot look up; a source outside
# is cited by its address (github.com/owner/name/issues/N), a page of docs/ by its name and section.
TRACKER_RE = re.compile(r"(?<![\w&])#\d|\b[Ii]ssues? #?\d")


def project_files():
    """{module name: path} for every .py of the project outside tests/."""
    files = {p.stem: p for p in REPO.glob("*.py")}
    for folder in FOLDERS:
        files.update({f"{folder}.{p.stem}": p for p in (REPO / folder).glob("*.py") if p.stem != "__init__"})
    return files


def imports_of(path, modules, inner_only=False):
    """The project modules that `path` imports anywhere in the file (top level, functions, __main__), or
    with inner_only those imported anywhere but at the top level."""
    tree = ast.parse(path.read_text())
    nodes = ast.walk(tree)
    if inner_only:  # the bodies of functions and of the __main__ block
        scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) or
                  (isinstance(n, ast.If) and "__main__" in ast.unparse(n.test))]
        nodes = [n for scope in scopes for n in ast.walk(scope)]
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from taskdata import parsers` and `from taskdata.parsers import x` import taskdata.parsers
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found |= {n for n in names if n in modules or n.split(".")[0] in FOLDERS}
    return found


def graph():
    files = project_files()
    return files, {m: imports_of(p, files) - {m} for m, p in files.items()}


def test_top_level_is_the_reading_path_and_six_folders():
    assert {p.stem for p in REPO.glob("*.py")} == READING_PATH
    folders = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")} - \
        {"docs", "tests", "out", "__pycache__"}
    assert folders == set(FOLDERS) and len(FOLDERS) <= 6, folders
    for folder in FOLDERS:
        assert (REPO / folder / "__init__.py").exists(), f"{folder}/ must be a package (python -m {folder}.x)"
    assert "MIT License" in (REPO / "LICENSE").read_text()


def test_the_core_imports_neither_the_field_nor_the_lab():
    # the eight files and everything they import, transitively, as `python -m lab.closure` measures it
    core = closure(REPO)
    assert READING_PATH <= set(core), sorted(READING_PATH - set(core))
    bad = outside_modules(core)
    assert not bad, f"the core's import closure holds {bad} (python -m lab.closure names the files)"


def test_no_line_of_the_eight_names_another_method_family_or_tool():
    hits = []
    for name in sorted(READING_PATH):
        for i, line in enumerate((REPO / f"{name}.py").read_text().splitlines(), 1):
            words = sorted({m.group(0) for m in NOT_D1_RE.finditer(line)})
            if words:
                hits.append(f"{name}.py:{i}: {', '.join(words)}: {line.strip()}")
    assert not hits, "the eight files hold d1 alone; these lines name the field, the lab or another family:\n" + \
        "\n".join(hits)


def test_no_import_cycles():
    _, g = graph()
    # depth-first search; a back edge is a cycle, reported as the path that closes it
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(g[m]):
            if n not in g:
                continue
            if state.get(n) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(g):
        if m not in state:
            visit(m)


def test_the_folders_stand_below_beside_and_above_the_eight_files():
    _, g = graph()
    for m, deps in g.items():
        folder = m.split(".")[0] if "." in m else None
        top = {d for d in deps if "." not in d and d in READING_PATH}
        field = {d for d in deps if d.split(".")[0] in BESIDE}
        lab = {d for d in deps if d.split(".")[0] in ABOVE}
        if folder is None:
            assert not field, f"{m}.py (one of the eight) imports {sorted(field)}: the field plugs in from outside"
        if folder in BELOW:
            up = {d for d in top - GROUND if (m, d) not in EXCEPTIONS}
            assert not up, f"{m} (below the eight files) imports {sorted(up)}"
            assert not field, f"{m} (below the eight files) imports {sorted(field)}"
        # methods/ builds on the core: any of the eight files and the folders below them
        if folder not in ABOVE:
            assert not lab, f"{m} imports {sorted(lab)}: nothing imports lab/"


def test_every_import_sits_at_the_top():
    # an import inside a function (or a __main__ block) hides a dependency, and one made to dodge a cycle hides
    # a wrong layer; third-party and standard-library imports may be lazy (optional dependencies)
    files = project_files()
    inner = {m: imports_of(p, files, inner_only=True) for m, p in files.items()}
    assert not {m: sorted(v) for m, v in inner.items() if v}


def test_no_file_is_too_long_and_the_eight_are_narrow():
    # the hard caps, in `make test`: a forker's change stays inside them
    long = {str(p.relative_to(REPO)): n for p in project_files().values()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}"
    lines = {name: (REPO / f"{name}.py").read_text().splitlines() for name in sorted(READING_PATH)}
    too_wide = [f"{name}.py:{i}" for name, text in lines.items() for i, line in enumerate(text, 1)
                if len(line) > MAX_WIDTH]
    assert not too_wide, f"lines over {MAX_WIDTH} characters: {too_wide}"


@pytest.mark.shape
def test_the_eight_keep_a_forkers_room():
    # the developers' budget, in `make shape` (CI runs it; the README's `make test` does not): each of the
    # eight FORK_ROOM lines under the cap and few wide lines, so that a forker's change never fails make test
    lines = {name: (REPO / f"{name}.py").read_text().splitlines() for name in sorted(READING_PATH)}
    full = {f"{name}.py": len(text) for name, text in lines.items() if len(text) > MAX_LINES - FORK_ROOM}
    assert not full, f"over {MAX_LINES - FORK_ROOM} lines ({FORK_ROOM} under the cap, a forker's room): {full}"
    wide = {f"{name}.py": sum(len(line) > WIDE for line in text) for name, text in lines.items()}
    assert sum(wide.values()) <= MAX_WIDE, f"{sum(wide.values())} lines over {WIDE} characters in the eight " \
        f"files (at most {MAX_WIDE}): {wide}"


def test_the_readme_opens_with_d1():
    # its first code block, in the first screen, is the two commands; the whole README fits 300 lines
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 300, f"README.md: {len(lines)} lines (at most 300)"
    fences = [i for i, line in enumerate(lines) if line.startswith("```")]
    assert fences and fences[1] < 40, "the README's first code block ends within its first 40 lines"
    block = lines[fences[0] + 1:fences[1]]
    assert [line.split("#")[0].strip() for line in block] == ["make run", "make test"], block


def text_files():
    texts = [p for p in REPO.rglob("*") if p.suffix in (".py", ".md", ".sh") or p.name == "Makefile"]
    return [p for p in texts if not {".venv", "out", ".git"} & set(p.relative_to(REPO).parts)]


def test_citations_resolve_inside_the_repository():
    """No code, script or doc points outside the repository (../shared is the developers' reference
    shelf, not part of a clone), and every page of docs/ that is cited exists."""
    # the two forbidden strings are built, not written, so this file passes its own check
    outside = ("shared" + "/docs", "d1" + "-spec")
    for p in text_files():
        text = p.read_text()
        rel = p.relative_to(REPO)
        for bad in outside:
            assert bad not in text, f"{rel} cites {bad}, which is outside the repository"
        for doc in set(re.findall(r"docs/[\w.-]+\.md", text)):
            assert (REPO / doc).exists(), f"{rel} cites {doc}, which does not exist"


def test_no_tracker_numbers_in_the_docs_or_the_core():
    """A clone cannot look up this project's tracker: the README, docs/ and the core's comments cite a
    page of docs/ instead (an upstream issue by its address)."""
    core = [p for p in closure(REPO).values()]
    hits = []
    for p in sorted(REPO.glob("docs/*.md")) + [REPO / "README.md"] + sorted(core):
        text = comments(p) if p.suffix == ".py" else p.read_text()
        for line in text.splitlines():
            if TRACKER_RE.search(line):
                hits.append(f"{p.relative_to(REPO)}: {line.strip()}")
    assert not hits, "tracker numbers:\n" + "\n".join(hits)


def test_cited_readme_sections_exist():
    headings = {line.lstrip("#").strip() for line in (REPO / "README.md").read_text().splitlines()
                if line.startswith("#")}
    for p in text_files():
        for section in re.findall("README" + r' "([^"]+)"', p.read_text()):  # built: not a citation itself
            section = " ".join(section.split())  # a citation may break across lines
            assert section in headings, f"{p.relative_to(REPO)} cites README \"{section}\", which has no such section"


def comments(path):
    """The comments and docstrings of a .py file, as text."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and tok.string.startswith(('"""', "'''"))):
            out.append(tok.string)
    return "\n".join(out)


def test_a_bare_file_name_in_a_comment_names_one_file():
    names = {}
    for p in list(REPO.glob("*.py")) + [p for f in FOLDERS for p in (REPO / f).glob("*.py")]:
        names.setdefault(p.name, []).append(p)
    sources = list(project_files().values()) + list((REPO / "tests").glob("*.py"))
    for p in sources:
        # bare: not part of a path (no "/" or "." before it) and not a module path (lab.bench); a bare name
        # of the eight is the top-level file (methods/grpo.py is cited with its folder)
        for name in set(re.findall(r"(?<![\w/.-])([a-z_][a-z0-9_]*\.py)\b", comments(p))):
            if name in EXTERNAL or (REPO / "tests" / name).exists() or name[:-3] in READING_PATH:
                continue
            assert len(names.get(name, [])) == 1, f"{p.relative_to(REPO)}: {name} names {len(names.get(name, []))} files"
