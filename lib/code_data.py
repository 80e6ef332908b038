"""
The code sets' readers: d1's code RL set (KodCode) and the code benchmarks (HumanEval, HumanEval+,
MBPP, MBPP+, LeetCodeDataset), each record turned into one item format. tasks.py puts d1's code
prompt on top of every item (tasks.rl_prompt, docs/coding.md §1.1) and holds the task table.

An item holds `question` (the text after d1's code instruction) and `solution` (a reference program)
plus the tests, in one of two forms, both scored by rewards.coding_reward in sandbox/run.py:
  code (KodCode)   tests: the pytest source, rewritten into test calls by d1's own preparation
                   (lib/code_prep.py);
  the benchmarks   entry_point, task_id, program_prefix (code that goes before the model's: HumanEval's
                   prompt, MBPP's test imports) and unit_tests (snippets run after program_prefix + code;
                   each passes if it raises nothing). Ours: d1's code eval script was not released
                   (docs/coding.md §1.5).
Records come from lib/records.py (files, or hub dataset ids); every error names the file and record.

    from lib.code_data import check_tests, read_humaneval
    read_humaneval("humaneval/HumanEval.jsonl.gz")[0]["unit_tests"][0]   # 'METADATA = ...\\ncandidate = ...'
"""
import ast

from lib.records import field, read_records

# The benchmarks' questions (ours). KodCode's questions name the function in their text; a benchmark
# question shows the signature (HumanEval, LeetCode's starter code) or one test (MBPP, as its paper's
# prompt does), so the model knows what to define
HUMANEVAL_QUESTION = "Complete the following Python function. Write the whole function.\n```python\n{prompt}```"
MBPP_QUESTION = "{text}\nYour code should pass this test:\n{test}"
CHECK_FUNCTION = "check"  # HumanEval-style test files define check(candidate)


def read_kodcode(path):
    """KodCode-Light-RL-10K rows (question, solution, test; test_info unused), as d1 trains code on
    them: tests = the pytest source, scored by rewards.coding_reward. The set itself is on the HF hub
    only; any local file in its format works (json array or jsonl)."""
    out = []
    for where, rec in read_records(path):
        ex = {k: field(rec, src, where) for k, src in (("question", "question"), ("solution", "solution"),
                                                      ("tests", "test"))}
        if not all(isinstance(v, str) and v.strip() for v in ex.values()):
            raise ValueError(f"{where}: question, solution and test must be non-empty strings")
        out.append(ex)
    return out


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
        prompt, body, test, entry = (field(rec, k, where) for k in ("prompt", "canonical_solution", "test", "entry_point"))
        out.append(dict(question=HUMANEVAL_QUESTION.format(prompt=prompt), task_id=rec.get("task_id", where),
                        entry_point=entry, program_prefix=prompt, solution=prompt + body,
                        unit_tests=check_tests(test, entry)))
    return out


def read_mbpp(path):
    """MBPP, either file: sanitized-mbpp.json (prompt, code, test_imports, test_list) or the full mbpp.jsonl
    (text, code, test_setup_code, test_list). Each assert of test_list is a unit test; the question
    shows the first one (it names the function). eval.py keeps d1's split, task_id 11-510."""
    out = []
    for where, rec in read_records(path):
        text = rec.get("prompt") or field(rec, "text", where)
        asserts = field(rec, "test_list", where)
        # the imports the tests need (sanitized) or the setup code (full MBPP), ahead of the model's code
        prefix = "\n".join(rec.get("test_imports") or []) or rec.get("test_setup_code") or ""
        out.append(dict(question=MBPP_QUESTION.format(text=text, test=asserts[0]),
                        task_id=field(rec, "task_id", where), entry_point=None, program_prefix=prefix,
                        solution=field(rec, "code", where), unit_tests=list(asserts)))
    return out


def read_mbpp_plus(path):
    """MBPP+ jsonl.gz (prompt = a docstring with one example assert, canonical_solution, assertion = the
    base asserts). Base tests only, as for HumanEval+."""
    out = []
    for where, rec in read_records(path):
        asserts = [line for line in field(rec, "assertion", where).splitlines() if line.strip()]
        text = field(rec, "prompt", where).strip().strip('"').strip()  # the docstring's text, example included
        out.append(dict(question=text, task_id=field(rec, "task_id", where),
                        entry_point=field(rec, "entry_point", where), program_prefix="",
                        solution=field(rec, "canonical_solution", where), unit_tests=asserts))
    return out


def read_leetcode(path):
    """LeetCodeDataset jsonl.gz (query = problem + starter code, prompt = the imports every solution may
    use, completion = reference, test = check(candidate), entry_point = "Solution().method"). The
    train file (1,890 problems) is the realistic code-RL set available here; test (200) evaluates."""
    out = []
    for where, rec in read_records(path):
        entry = field(rec, "entry_point", where)
        out.append(dict(question=field(rec, "query", where), task_id=field(rec, "task_id", where),
                        entry_point=entry, program_prefix=field(rec, "prompt", where),
                        solution=field(rec, "completion", where),
                        unit_tests=check_tests(field(rec, "test", where), entry)))
    return out
