"""Configuration and language errors as a user sees them: one line, naming the option, file, row or value."""

from __future__ import annotations

import pytest

from amrsim.errors import ConfigError
from tests.helpers import one_line_error, run_cli

PAIRS = [["A man plays a guitar.", "Ein Mann spielt Gitarre.", "4.5", "en", "de-DE"],
         ["A cat sleeps.", "Der Aktienmarkt fiel.", "0.5", "en", "de-DE"],
         ["A dog runs.", "Ein Hund rennt.", "4.8", "en", "de-DE"]]


@pytest.fixture
def sts_file(tmp_path, write_tsv):
    (tmp_path / "pipelines.yaml").write_text("warehouse: wh\npipelines: {demo: {}}\n", encoding="utf-8")
    return write_tsv("x_test.tsv", ["sentence1", "sentence2", "score", "lang1", "lang2"], PAIRS)


def test_evaluate_sts_reads_a_region_tagged_lang2_column_as_the_language(tmp_path, sts_file):
    done = run_cli(tmp_path, "evaluate", "sts", "--encoder", "minilm", "--file", str(sts_file), "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert '"lang_pair": "en-de"' in done.stdout
    assert done.stderr.strip() == "x_test.tsv:2: language 'de-DE' read as 'de' (region and script are not used)"


@pytest.mark.parametrize("args, expected", [
    (["--translation", "..=x_test.tsv"],
     "error: --translation '..=x_test.tsv': '..' is not a language code (an ISO 639 code such as en, de, es, zh)"),
    (["--lang-pairs", "en-de-DE"],
     "error: --lang-pairs: key 'lang_pairs', value ['en-de-DE']: lang pair 'en-de-DE' must be two language "
     "codes joined by '-', like 'en-de' (an ISO 639 code such as en, de, es, zh)"),
])
def test_evaluate_sts_option_errors_name_the_option_and_value(tmp_path, sts_file, args, expected):
    done = run_cli(tmp_path, "evaluate", "sts", "--encoder", "minilm", "--file", "x_test.tsv", *args)
    assert one_line_error(done) == expected


def test_a_url_password_in_a_dataset_path_is_masked_on_every_line(tmp_path, write_config):
    from amrsim.config import load_config
    from amrsim.secrets import redact

    url = "https://alice:hunter2secret@example.com/data.tsv"
    path = write_config(f"default_pipeline: p\npipelines:\n  p:\n    datasets:\n"
                        f"      d: {{path: '{url}', kind: pairs}}\n")
    with pytest.raises(ConfigError) as e:
        load_config(path).pipeline("p")
    # the value as written and the path it resolves to (where '//' becomes '/') both carry the password
    assert str(e.value).count("hunter2secret") == 2
    assert "hunter2secret" not in redact(str(e.value))
    done = run_cli(tmp_path, "run", "p")
    line = one_line_error(done)
    assert "hunter2secret" not in line and "alice" not in line
    assert "value 'https://***@example.com/data.tsv': file not found" in line and "https:/***@example.com" in line
