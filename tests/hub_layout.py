"""A Hugging Face hub cache laid out as `huggingface_hub` writes it, with the study's dataset
repositories in their real layouts: file names, formats, README configs (and LiveCodeBench's
loading script), holding rows in each repository's schema.

``<cache>/datasets--<owner>--<name>/``: ``blobs/<sha256>`` (the files' content),
``snapshots/<commit>/<path>`` (relative symlinks to the blobs) and ``refs/<ref>`` (the commit a
branch or pull-request ref points to). `offline` points `huggingface_hub` and `datasets` at such
a cache with the hub switched off, as ``HF_HUB_CACHE`` and ``HF_HUB_OFFLINE=1`` do when set
before the import (both libraries read them into module constants then).

Where each layout comes from is in docs/data.md ("The hub repositories"). The rows are the
loader fixtures' (tests/fixtures/paper/), written in the formats the repositories use.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import cptlab.domains.paper as paper
from cptlab.domains.paper import code, knowledge, logic, math, science

FIXTURES = Path(__file__).parent / "fixtures" / "paper"


class HubCache:
    """A hub cache folder to which repositories are added at commits."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def repo_folder(self, repo: str) -> Path:
        return self.root / ("datasets--" + repo.replace("/", "--"))

    def add(
        self, repo: str, commit: str, files: dict[str, bytes | str], refs: tuple[str, ...] = ()
    ) -> Path:
        """Write `files` ({path in the repository: content}) as the snapshot of `commit`, each
        ref in `refs` pointing to it; returns the snapshot folder."""
        folder = self.repo_folder(repo)
        snapshot = folder / "snapshots" / commit
        for relative, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
            blob.parent.mkdir(parents=True, exist_ok=True)
            blob.write_bytes(data)
            link = snapshot / relative
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(blob, link.parent))
        for ref in refs:
            path = folder / "refs" / ref
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(commit)
        return snapshot


def offline(monkeypatch, cache: HubCache) -> None:
    """Read hub repositories from `cache` only, as on a compute node."""
    import datasets
    import huggingface_hub

    for name, value in (("HF_HUB_CACHE", str(cache.root)), ("HF_HUB_OFFLINE", "1"),
                        ("HF_DATASETS_OFFLINE", "1")):  # fmt: skip
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache.root))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)


# ----- file formats -----------------------------------------------------------------------------


def json_lines(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def parquet(rows: list[dict]) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    return buffer.getvalue()


def arrow_stream(rows: list[dict]) -> bytes:
    """The Arrow stream file `Dataset.save_to_disk` writes (data-00000-of-00001.arrow)."""
    table = pa.Table.from_pylist(rows)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def csv_text(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def fixture_rows(relative: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / relative).read_text().splitlines() if line]


def card(front_matter: str, title: str) -> str:
    return f"---\n{front_matter.strip()}\n---\n# {title}\n"


# ----- the repositories -------------------------------------------------------------------------

GPQA_CARD = card(
    """
license: cc-by-4.0
viewer: true
extra_gated_prompt: >-
  You agree to NOT reveal examples from this dataset in plain text or images
  online, to reduce the risk of leakage into foundation model training corpora.
extra_gated_fields:
  I accept these terms: checkbox
configs:
- config_name: gpqa_extended
  data_files: gpqa_extended.csv
- config_name: gpqa_main
  data_files: gpqa_main.csv
- config_name: gpqa_diamond
  data_files: gpqa_diamond.csv
- config_name: gpqa_experts
  data_files: gpqa_experts.csv
pretty_name: GPQA
""",
    "Dataset Card for GPQA",
)


def gpqa_rows() -> list[dict]:
    """The fixture's questions, and two as the real file has them: a question whose incorrect
    options repeat one another, and options with spaces around them."""
    with open(FIXTURES / "gpqa_diamond" / "gpqa_diamond.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    template = dict(rows[0])
    rows.append({**template, "Question": "Which value does the ratio approach?",
                 "Correct Answer": "1/2", "Incorrect Answer 1": "1/3",
                 "Incorrect Answer 2": "1/3", "Incorrect Answer 3": "2",
                 "Record ID": "recRepeatOpt01"})  # fmt: skip
    rows.append({**template, "Question": "What is the product formed?",
                 "Correct Answer": " benzoic acid", "Incorrect Answer 1": "phenol ",
                 "Incorrect Answer 2": "benzene", "Incorrect Answer 3": " toluene ",
                 "Record ID": "recSpacedOpt02"})  # fmt: skip
    return rows


def gpqa_files() -> dict[str, str]:
    rows = csv_text(gpqa_rows())
    names = ("gpqa_diamond.csv", "gpqa_main.csv", "gpqa_extended.csv", "gpqa_experts.csv")
    return {"README.md": GPQA_CARD, **{name: rows for name in names}}


LCB_CARD = card(
    """
license: cc
tags:
- code
- code generation
pretty_name: LiveCodeBench
size_categories:
- n<1K
""",
    "LiveCodeBench: Holistic and Contamination Free Evaluation of Large Language Models for Code",
)
# The repository's loading script: only its name matters here (datasets refuses a repository
# that holds <repository name>.py); cptlab never runs it.
LCB_SCRIPT = """import datasets

_CITATION = "LiveCodeBench"
ALLOWED_FILES = {"release_v6": ["test.jsonl", "test2.jsonl", "test3.jsonl", "test4.jsonl",
                                "test5.jsonl", "test6.jsonl"]}


class LCBCodeGeneration(datasets.GeneratorBasedBuilder):
    VERSION = datasets.Version("1.0.0")
"""


def lcb_files() -> dict[str, str]:
    """The six release files, the fixture's 2025 problems in test6.jsonl (as the real one holds
    2025-01 to 2025-04), one 2023 problem in test.jsonl, the others empty here."""
    newest = fixture_rows("livecodebench/test6.jsonl")
    older = {**newest[0], "question_id": "abc300_a", "contest_id": "abc300",
             "contest_date": "2023-05-13T00:00:00"}  # fmt: skip
    files = {name: "" for name in code.LCB_HUB_FILES}
    files["test.jsonl"] = json_lines([older])
    files["test6.jsonl"] = json_lines(newest)
    return {"README.md": LCB_CARD, "code_generation_lite.py": LCB_SCRIPT, **files}


def mmlu_redux_files(extra: dict[str, list[dict]] | None = None) -> dict[str, bytes | str]:
    """One Arrow file per subject, <subject>/data-00000-of-00001.arrow, and one config per
    subject in the card: the fixture's anatomy and astronomy rows, one row in each other
    subject; `extra` adds rows to subjects."""
    configs = "".join(
        f"- config_name: {s}\n  data_files:\n  - split: test\n    path: {s}/data-*\n"
        for s in knowledge.MMLU_SUBJECTS
    )
    files: dict[str, bytes | str] = {"README.md": card(f"license: cc-by-4.0\nconfigs:\n{configs}",
                                                       "MMLU-Redux-2.0")}  # fmt: skip
    fixture = {s: fixture_rows(f"mmlu_redux/{s}.jsonl") for s in ("anatomy", "astronomy")}
    template = fixture["anatomy"][0]
    for subject in knowledge.MMLU_SUBJECTS:
        rows = fixture.get(subject) or [{**template, "question": f"A question of {subject}?"}]
        rows = rows + (extra or {}).get(subject, [])
        files[f"{subject}/data-00000-of-00001.arrow"] = arrow_stream(rows)
    return files


ZEBRA_CARD = card(
    """
configs:
- config_name: grid_mode
  data_files:
  - split: test
    path: grid_mode/test-*
- config_name: mc_mode
  data_files:
  - split: test
    path: mc_mode/test-*
extra_gated_prompt: "Please do not use this dataset to train your models."
""",
    "ZebraLogic",
)


def zebralogic_files() -> dict[str, bytes | str]:
    grid = fixture_rows("zebralogic/grid_mode.jsonl")
    mc = [{"id": "lgp-test-2x2-1#mc-0", "puzzle": grid[0]["puzzle"],
           "question": "Who owns the cat?", "choices": ["Alice", "Bob"], "answer": "Bob",
           "created_at": grid[0]["created_at"]}]  # fmt: skip
    return {"README.md": ZEBRA_CARD,
            "grid_mode/test-00000-of-00001.parquet": parquet(grid),
            "mc_mode/test-00000-of-00001.parquet": parquet(mc)}  # fmt: skip


DOLCI_CARD = card(
    """
license: odc-by
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*
""",
    "Dolci-Think-RL-7B",
)


def dolci_rows() -> list[dict]:
    """The fixture's rows, and a 'code' row whose one test opens with a class definition (real
    tests do), which must not be read as a packed blob."""
    rows = fixture_rows("dolci_code/dolci_think_rl.jsonl")
    for row in rows:  # the hub's `dataset` is a list of one label (the fixture varies it)
        row["dataset"] = row["dataset"] if isinstance(row["dataset"], list) else [row["dataset"]]
    test = ("class Counter:\n    def __init__(self):\n        self.n = 0\n\n"
            "c = Counter()\nassert count_up(c) == 1\nassert count_up(c) == 2")  # fmt: skip
    rows.append({"id": "code-class-7",
                 "prompt": "user: Write count_up(c) that increments c.n and returns it.",
                 "ground_truth": [test], "dataset": ["code"], "passrate": 0.5,
                 "original_dataset": "saurabh5/rlvr_acecoder_filtered"})  # fmt: skip
    return rows


def dolci_files() -> dict[str, bytes | str]:
    rows = dolci_rows()
    half = len(rows) // 2
    return {"README.md": DOLCI_CARD,
            "data/train-00000-of-00002.parquet": parquet(rows[:half]),
            "data/train-00001-of-00002.parquet": parquet(rows[half:])}  # fmt: skip


def dapo_files() -> dict[str, bytes | str]:
    card_text = card("license: apache-2.0\ntask_categories:\n- text-generation", "DAPO-Math-17k")
    return {
        "README.md": card_text,
        "data/dapo-math-17k.parquet": parquet(fixture_rows("dapo_math/dapo_math.jsonl")),
    }


SCIKNOWEVAL_CARD = card(
    """
license: mit
configs:
- config_name: v2
  data_files:
  - split: test
    path: "data/v2/sciknoweval_test_v2.jsonl"
""",
    "SciKnowEval",
)


def sciknoweval_files() -> dict[str, str]:
    rows = fixture_rows("sciknoweval/sciknoweval.jsonl")
    return {"README.md": SCIKNOWEVAL_CARD, "data/v2/sciknoweval_test_v2.jsonl": json_lines(rows)}


def math_ai_files(title: str, rows: list[dict]) -> dict[str, str]:
    """math-ai's layout: one test.jsonl and its card."""
    return {"README.md": card("license: apache-2.0", title), "test.jsonl": json_lines(rows)}


# ----- every hub repository the registry reads, at its pinned commit -----------------------------

# A commit for the repositories cptlab cannot pin; the config must name one (revision).
MATH500_COMMIT = "5" * 40
ZEBRA_COMMIT = "7" * 40


def study_hub(cache: HubCache | LoopbackHub) -> dict[str, str]:
    """Every repository of the paper config's hub benchmarks at the commit the registry pins
    (or the ones above), with `main` pointing to it, in a hub cache or a loopback hub; returns
    the revisions a config must give."""
    aime24, aime25 = math.AIME_REVISIONS
    cache.add(
        "math-ai/aime24",
        aime24,
        math_ai_files("AIME 2024", fixture_rows("aime/aime24.jsonl")),
        ("main",),
    )
    cache.add(
        "math-ai/aime25",
        aime25,
        math_ai_files("AIME 2025", fixture_rows("aime/aime25.jsonl")),
        ("main",),
    )
    cache.add(
        math.MATH500_HUB,
        MATH500_COMMIT,
        math_ai_files("MATH-500", fixture_rows("math500/test.jsonl")),
        ("main",),
    )
    cache.add(math.DAPO_HUB, math.DAPO_REVISION, dapo_files(), ("main",))
    cache.add(science.SCIKNOWEVAL_HUB, science.SCIKNOWEVAL_REVISION, sciknoweval_files(), ("main",))
    cache.add(science.GPQA_HUB, science.GPQA_REVISION, gpqa_files(), ("main",))
    cache.add(code.DOLCI_HUB, code.DOLCI_REVISION, dolci_files(), ("main",))
    cache.add(code.LCB_HUB, code.LCB_REVISION, lcb_files(), ("main",))
    cache.add(logic.ZEBRA_HUB, ZEBRA_COMMIT, zebralogic_files(), ("main",))
    cache.add(knowledge.MMLU_REDUX_HUB, knowledge.MMLU_REDUX_REVISION, mmlu_redux_files(),
              ("main",))  # fmt: skip
    return {"math500": MATH500_COMMIT, "zebralogic": ZEBRA_COMMIT}


# The hub benchmarks, by the fixture the same rows are read from locally (None: no local copy of
# these exact rows).
HUB_BENCHMARKS = {
    "dapo_math": "dapo_math",
    "aime": "aime",
    "math500": "math500",
    "sciknoweval_train": "sciknoweval",
    "sciknoweval_test": "sciknoweval",
    "gpqa_diamond": None,
    "dolci_code_train": None,
    "dolci_code_test": None,
    "dolci_code_stdio_train": None,
    "dolci_code_stdio_test": None,
    "livecodebench": None,
    "zebralogic": "zebralogic",
    "mmlu_redux": None,
}
assert {b.name for b in paper.PAPER_BENCHMARKS if b.loader.source.hub} == set(HUB_BENCHMARKS)


# ----- a hub on the loopback interface, for `cptlab fetch-data` -----------------------------


class LoopbackHub:
    """The few endpoints of the Hugging Face hub that `huggingface_hub`'s `auth_check`,
    `dataset_info` and `snapshot_download` call, serving repositories from memory on
    127.0.0.1 (``HF_ENDPOINT`` points a process at it). `gated` repositories answer 403 with
    the hub's ``X-Error-Code: GatedRepo``, as for a token whose account has not accepted their
    terms."""

    def __init__(self) -> None:
        self.commits: dict[str, dict[str, dict[str, bytes]]] = {}  # repo -> commit -> files
        self.refs: dict[str, dict[str, str]] = {}  # repo -> ref -> commit
        self.gated: set[str] = set()
        self.requests: list[str] = []

    def add(self, repo: str, commit: str, files: dict[str, bytes | str], refs=("main",)) -> None:
        data = {k: v.encode() if isinstance(v, str) else v for k, v in files.items()}
        self.commits.setdefault(repo, {})[commit] = data
        for ref in refs:
            self.refs.setdefault(repo, {})[ref] = commit

    def commit(self, repo: str, revision: str) -> str | None:
        if revision in self.commits.get(repo, {}):
            return revision
        return self.refs.get(repo, {}).get(revision)

    def __enter__(self) -> str:
        hub = self

        class Handler(_HubHandler):
            state = hub

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


class _HubHandler(BaseHTTPRequestHandler):
    state: LoopbackHub

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value) -> None:
        self._send(200, json.dumps(value).encode(), {"Content-Type": "application/json"})

    def _missing(self, code: str = "EntryNotFound") -> None:
        self._send(404, b"{}", {"X-Error-Code": code, "Content-Type": "application/json"})

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        from urllib.parse import unquote, urlparse

        hub = self.state
        hub.requests.append(f"{self.command} {self.path}")
        parts = [unquote(p) for p in urlparse(self.path).path.strip("/").split("/")]
        if parts[:2] == ["api", "datasets"] and len(parts) >= 4:
            repo, rest = f"{parts[2]}/{parts[3]}", parts[4:]
            if repo not in hub.commits:
                return self._missing("RepoNotFound")
            if rest == ["auth-check"]:
                if repo in hub.gated:
                    return self._send(403, b"{}", {"X-Error-Code": "GatedRepo"})
                return self._json({})
            if not rest or rest[0] == "revision":
                commit = hub.commit(repo, "/".join(rest[1:]) or "main")
                if commit is None:
                    return self._missing("RevisionNotFound")
                return self._json({"id": repo, "sha": commit, "gated": repo in hub.gated})
            if rest[0] == "tree":
                commit = hub.commit(repo, rest[1])
                if commit is None:
                    return self._missing("RevisionNotFound")
                files = hub.commits[repo][commit]
                return self._json([
                    {"type": "file", "path": path, "size": len(data),
                     "oid": hashlib.sha1(data).hexdigest()}
                    for path, data in sorted(files.items())
                ])  # fmt: skip
        if parts[:1] == ["datasets"] and len(parts) >= 6 and parts[3] == "resolve":
            repo, revision, path = f"{parts[1]}/{parts[2]}", parts[4], "/".join(parts[5:])
            commit = hub.commit(repo, revision) if repo in hub.commits else None
            if commit is None:
                return self._missing("RevisionNotFound")
            if repo in hub.gated:
                return self._send(403, b"{}", {"X-Error-Code": "GatedRepo"})
            data = hub.commits[repo][commit].get(path)
            if data is None:
                return self._missing()
            etag = '"' + hashlib.sha256(data).hexdigest() + '"'
            return self._send(200, data, {"X-Repo-Commit": commit, "ETag": etag})
        self._missing()
