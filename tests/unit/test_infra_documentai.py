"""infra/ for PDFs read by Document AI's layout parser (var.pdf_reader = "documentai"): the processor,
its API, the cleaner's role and the variables the code reads at start-up, in step with the code's
settings (shared/contract/config.py)."""

from __future__ import annotations

import re

import pytest

from shared.contract.config import SETTING_BY_FIELD, load_settings
from tests.unit.test_infra import _default, _local, _resource, _tf

pytestmark = pytest.mark.unit


def _choices(variable: str) -> list[str]:
    (validation,) = _tf()["variable"][variable]["validation"]
    return re.findall(r'"([a-z]+)"', validation["condition"])


def test_the_processor_is_a_layout_parser_created_only_when_chosen():
    processor = _resource("google_document_ai_processor", "layout")
    assert processor["type"] == "LAYOUT_PARSER_PROCESSOR"
    assert processor["count"] == '${var.pdf_reader == "documentai" ? 1 : 0}'
    assert processor["location"] == "${var.documentai_location}"
    assert "documentai.googleapis.com" in _local("apis")
    assert "${google_project_service.api}" in processor["depends_on"]


def test_the_variables_offer_what_the_settings_accept_and_default_alike():
    for variable, field in (("pdf_reader", "pdf_reader"), ("documentai_location", "documentai_location")):
        assert _choices(variable) == list(SETTING_BY_FIELD[field].kind.options), variable
    assert _default("pdf_reader") == "local" and _default("documentai_location") == "us"


def test_the_functions_get_the_processor_s_name_only_in_documentai_mode_and_it_starts():
    env = str(_local("common_env"))
    assert 'var.pdf_reader == "documentai" ?' in env
    for name, value in (("RAGBUS_PDF_READER", '"documentai"'),
                        ("RAGBUS_DOCUMENTAI_PROCESSOR", "google_document_ai_processor.layout[0].id"),
                        ("RAGBUS_DOCUMENTAI_LOCATION", "var.documentai_location")):
        assert re.search(rf"{name}\s*=\s*{re.escape(value)}", env), name
    # the processor's id is its full name (projects/P/locations/L/processors/ID), which the code takes
    settings = load_settings({"RAGBUS_PDF_READER": "documentai", "RAGBUS_DOCUMENTAI_LOCATION": "eu",
                              "RAGBUS_DOCUMENTAI_PROCESSOR": "projects/rb-prod/locations/eu/processors/5e1c0de"})
    assert settings.documentai_processor == "projects/rb-prod/locations/eu/processors/5e1c0de"


def test_only_the_cleaner_may_call_the_processor():
    bindings = str(_local("function_project_bindings"))
    grant = re.search(r'"\$\{name\}/roles/documentai\.apiUser"[^}]*\}\s*if ([^}]*)\}', bindings)
    assert grant, bindings
    assert grant.group(1).strip() == 'f.stage == "cleaner" && var.pdf_reader == "documentai"'
    assert [name for name, f in _local("functions").items() if f["stage"] == "cleaner"] == ["cleaner"]
