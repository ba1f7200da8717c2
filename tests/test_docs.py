"""The documentation resolves inside the repository and claims only what tests prove."""
import re
import subprocess

import pytest
from readme import README, ROOT

DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
TOP_LEVEL = r"(?:connector|broker|datasource|jobs|tests|bench|docs|tools|spark-conf|\.ci)/"
# Kafka clients a reader may look for, and how a test shows it drives one (None: no test can,
# nothing to install it from here)
CLIENTS = {"confluent-kafka": r"import confluent_kafka|from confluent_kafka",
           "kafka-python": r"from kafka import|import kafka\b",
           "kafkajs": r"kafkajs", "kcat": r'\["kcat"|which\("kcat"\)', "Java client": None,
           "aiokafka": r"import aiokafka",
           "librdkafka": None, "sarama": None, "franz-go": None}


def tracked_text_files():
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, names):
        path = ROOT / name
        if path.is_file() and path.suffix in (".py", ".md", ".c", ".ini", ".txt", ".cfg", ".toml", ""):
            yield path


def ignored(path):
    """Ignored by git: an output a run writes (bench results), not a file a clone has."""
    return subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT, check=False).returncode == 0


def slug(heading):
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_nothing_points_at_design_notes_outside_the_repository():
    this = ROOT / "tests" / "test_docs.py"
    found = [f"{path.relative_to(ROOT)}:{n}" for path in tracked_text_files() if path != this
             for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
             if re.search(r"DESIGN\.md|design notes", line, re.IGNORECASE)]
    assert not found, found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_resolve(doc):
    for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        assert file.exists(), f"{doc.name}: {target} does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", file.read_text(), re.MULTILINE)
            assert anchor in {slug(h) for h in headings}, f"{doc.name}: no heading for {target}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_repository_paths_named_in_the_docs_exist(doc):
    named = re.findall(rf"`({TOP_LEVEL}[\w./-]*)`", doc.read_text())
    missing = sorted({p for p in named if not (ROOT / p).exists() and not ignored(p)})
    assert not missing, f"{doc.name} names {missing}"


def test_the_readme_layout_table_lists_only_folders_that_exist():
    folders = re.findall(r"^\| `([\w.-]+)/` \|", README.read_text(), re.MULTILINE)
    assert folders and all((ROOT / f).is_dir() for f in folders), folders


def test_the_readme_says_a_client_works_only_where_a_test_runs_it():
    prose = re.sub(r"```.*?```", "", README.read_text(), flags=re.DOTALL).replace("\n", " ")
    tests = "\n".join(p.read_text(errors="replace") for p in (ROOT / "tests").rglob("*")
                      if p.suffix in (".py", ".js") and p.name != "test_docs.py")
    tested = {c for c, evidence in CLIENTS.items() if evidence and re.search(evidence, tests)}
    claims = [s for s in re.split(r"(?<=[.!?])\s+", prose)
              if re.search(r"\bwork|\btested", s) and not re.search(r"not tested|no test", s, re.I)]
    assert claims
    for sentence in claims:
        untested = [c for c in CLIENTS if c in sentence and c not in tested]
        assert not untested, f"the README says {untested} work, and no test runs them: {sentence}"


def test_the_layout_table_says_whether_the_spark_connector_is_built():
    row = re.search(r"^\| `datasource/` \|.*$", README.read_text(), re.MULTILINE).group(0)
    built = any(p.name != "__init__.py" for p in (ROOT / "datasource").glob("*.py")) or \
        (ROOT / "datasource" / "__init__.py").read_text().strip() != ""
    assert ("not built yet" in row) != built, row
