"""
The code sets' readers: d1's code RL set (KodCode) and the code benchmarks (HumanEval, HumanEval+,
MBPP, MBPP+, LeetCodeDataset), each record turned into one item format. tasks.py puts d1's code
prompt on top of every item (its record's prompt in tasks.py, docs/coding.md §1.1) and holds the task table.

An item holds `question` (the text after d1's code instruction) and `solution` (a reference program)
plus the tests, in one of two forms, both scored by rewards.coding_reward in sandbox/run.py:
  code (KodCode)   tests: the pytest source, rewritten into test calls by d1's own preparation
                   (sandbox/code_prep.py);
  the benchmarks   entry_point, task_id, program_prefix (code that goes before the model's: HumanEval's
                   prompt, MBPP's test imports) and unit_tests (snippets run after program_prefix + code;
                   each passes if it raises nothing). Ours: d1's code eval script was not released
                   (docs/coding.md §1.5).
Records come from taskdata/records.py (files, or hub dataset ids); every error names the file and record.

    from taskdata.code_data import check_tests, read_humaneval
    read_humaneval("humaneval/HumanEval.jsonl.gz")[0]["unit_tests"][0]   # 'METADATA = ...\\ncandidate = ...'
"""
import ast

from taskdata.records import check_text, describe, field, read_records

# The benchmarks' questions (ours). KodCode's questions name the function in their text; a benchmark
# question shows the signature (HumanEval, LeetCode's starter code) or one test (MBPP, as its paper's
# prompt does), so the model knows what to define
HUMANEVAL_QUESTION = "Complete the following Python function. Write the whole function.\n```python\n{prompt}```"
MBPP_QUESTION = "{text}\nYour code should pass this test:\n{test}"
CHECK_FUNCTION = "check"  # HumanEval-style test files define check(candidate)
MBPP_TEST_IDS = (11, 510)  # MBPP's test split (its README); d1's 257 = the sanitized records in it


def with_answer(read):
    """A code set's reader with the reference program as the gold answer (the records' `load`)."""
    def load(path):
        return [{**ex, "answer": ex["solution"]} for ex in read(path)]
    return load


def mbpp_test(examples):
    """d1's 257 MBPP items (the mbpp record's `heldout`): the test split, task_id 11-510 (of
    sanitized MBPP; 500 of the full file)."""
    return [i for i, ex in enumerate(examples)
            if MBPP_TEST_IDS[0] <= ex["task_id"] <= MBPP_TEST_IDS[1]]


def read_kodcode(path):
    """KodCode-Light-RL-10K rows (question, solution, test; test_info unused), as d1 trains code on
    them: tests = the pytest source, scored by rewards.coding_reward. The set itself is on the HF hub
    only; any local file in its format works (json array or jsonl)."""
    out = []
    for where, rec in read_records(path):
        question, solution, tests = _texts(rec, where, "question", "solution", "test")
        for key, value in (("question", question), ("solution", solution), ("test", tests)):
            if not value.strip():
                raise ValueError(f"{where}: field {key!r} is empty")
        out.append({"question": question, "solution": solution, "tests": tests})
    return out


def _texts(rec, where, *keys):
    """The string fields `keys` of a record (field(): a missing or non-string one is one ValueError)."""
    return tuple(field(rec, key, where, str) for key in keys)


def _unit_tests(rec, where, entry):
    """check_tests of the record's `test` field, its failures named by record: a test source that does not
    parse (a SyntaxError, not a ValueError) or nests too deeply for the parser would otherwise be a traceback."""
    test = field(rec, "test", where, str)
    try:
        return check_tests(test, entry)
    except (RecursionError, MemoryError):  # CPython's parser raises MemoryError when its own stack overflows
        raise ValueError(f"{where}: field 'test' is nested too deeply for Python's parser") from None
    except (ValueError, SyntaxError) as e:
        raise ValueError(f"{where}: field 'test': {type(e).__name__}: {e}") from None


def _string_list(rec, key, where, required=True):
    """rec[key] as a list of strings (MBPP's asserts, non-empty: the question shows the first; its imports,
    which may be empty or absent: then [])."""
    if not required and rec.get(key) is None:
        return []
    value = field(rec, key, where, list)
    if (required and not value) or not all(isinstance(v, str) for v in value):
        kind = "a non-empty list of strings" if required else "a list of strings"
        raise ValueError(f"{where}: field {key!r} must be {kind}, got {describe(value)}")
    return [check_text(v, key, where) for v in value]


def check_tests(test_source, entry_point):
    """HumanEval-style `def check(candidate): assert ...` source -> unit-test snippets. When check's
    body is only asserts, one snippet per assert (partial credit for RL; pass@1 needs them all), each
    run as `candidate = <entry_point>` plus the assert after the file's other top-level code
    (METADATA, imports); otherwise the whole file and `check(<entry_point>)` as a single test."""
    tree = ast.parse(test_source)
    check = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == CHECK_FUNCTION]
    if len(check) != 1:
        raise ValueError(f"test source without exactly one check(candidate) function: {test_source[:80]!r}")
    if not all(isinstance(n, ast.Assert) for n in check[0].body):
        return [f"{test_source}\ncheck({entry_point})"]
    # the file's other top-level statements, source-exact (ast.unparse would reformat them)
    preamble = "\n".join(ast.get_source_segment(test_source, n) for n in tree.body if n is not check[0])
    return [f"{preamble}\ncandidate = {entry_point}\n{ast.get_source_segment(test_source, a)}" for a in check[0].body]


def read_humaneval(path):
    """HumanEval / HumanEval+ jsonl(.gz): prompt (signature + docstring), canonical_solution (the body),
    test (check), entry_point. The program is the prompt followed by the model's code: a full function
    redefines the prompt's docstring-only one, a bare body completes it (the canonical one is a body).
    HumanEval+ here: its own canonical solutions against the BASE tests (its plus_input tests are
    differential against the canonical outputs and need evalplus)."""
    out = []
    for where, rec in read_records(path):
        prompt, body, entry = _texts(rec, where, "prompt", "canonical_solution", "entry_point")
        out.append(dict(question=HUMANEVAL_QUESTION.format(prompt=prompt), task_id=rec.get("task_id", where),
                        entry_point=entry, program_prefix=prompt, solution=prompt + body,
                        unit_tests=_unit_tests(rec, where, entry)))
    return out


def read_mbpp(path):
    """MBPP, either file: sanitized-mbpp.json (prompt, code, test_imports, test_list) or the full mbpp.jsonl
    (text, code, test_setup_code, test_list). Each assert of test_list is a unit test; the question
    shows the first one (it names the function). eval.py keeps d1's split, task_id 11-510."""
    out = []
    for where, rec in read_records(path):
        text = field(rec, "prompt" if rec.get("prompt") else "text", where, str)
        asserts = _string_list(rec, "test_list", where)
        # the imports the tests need (sanitized) or the setup code (full MBPP), ahead of the model's code
        imports = _string_list(rec, "test_imports", where, required=False)
        setup = field(rec, "test_setup_code", where, str) if rec.get("test_setup_code") is not None else ""
        prefix = "\n".join(imports) or setup
        out.append(dict(question=MBPP_QUESTION.format(text=text, test=asserts[0]),
                        task_id=field(rec, "task_id", where), entry_point=None, program_prefix=prefix,
                        solution=field(rec, "code", where, str), unit_tests=list(asserts)))
    return out


def read_mbpp_plus(path):
    """MBPP+ jsonl.gz (prompt = a docstring with one example assert, canonical_solution, assertion = the
    base asserts). Base tests only, as for HumanEval+."""
    out = []
    for where, rec in read_records(path):
        assertion, prompt, entry, solution = _texts(rec, where, "assertion", "prompt", "entry_point",
                                                    "canonical_solution")
        asserts = [line for line in assertion.splitlines() if line.strip()]
        text = prompt.strip().strip('"').strip()  # the docstring's text, example included
        out.append(dict(question=text, task_id=field(rec, "task_id", where), entry_point=entry, program_prefix="",
                        solution=solution, unit_tests=asserts))
    return out


def read_leetcode(path):
    """LeetCodeDataset jsonl.gz (query = problem + starter code, prompt = the imports every solution may
    use, completion = reference, test = check(candidate), entry_point = "Solution().method"). The
    train file (1,890 problems) is the realistic code-RL set available here; test (200) evaluates."""
    out = []
    for where, rec in read_records(path):
        entry, query, prompt, completion = _texts(rec, where, "entry_point", "query", "prompt", "completion")
        out.append(dict(question=query, task_id=field(rec, "task_id", where), entry_point=entry,
                        program_prefix=prompt, solution=completion, unit_tests=_unit_tests(rec, where, entry)))
    return out
