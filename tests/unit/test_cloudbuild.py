"""cloudbuild.yaml tests before it deploys, and deploys every function with Terraform."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

CLOUDBUILD = Path(__file__).resolve().parents[2] / "cloudbuild.yaml"
ORDER = ["install", "lint", "unit", "integration", "enable-apis", "deploy"]


def _build() -> dict:
    return yaml.safe_load(CLOUDBUILD.read_text())


def _steps() -> dict[str, dict]:
    return {step["id"]: step for step in _build()["steps"]}


def _text(step: dict) -> str:
    return " ".join([step.get("entrypoint", ""), *map(str, step.get("args", []))])


def test_steps_run_in_order_install_lint_unit_integration_deploy():
    ids = [step["id"] for step in _build()["steps"]]
    positions = [ids.index(name) for name in ORDER]
    assert positions == sorted(positions), ids


def test_each_step_waits_for_the_one_before():
    steps = _build()["steps"]
    assert "waitFor" not in steps[0] or steps[0]["waitFor"] == ["-"]
    for before, step in zip(steps, steps[1:], strict=False):
        assert step.get("waitFor") == [before["id"]], f"{step['id']} must wait for {before['id']}"


def test_steps_do_what_their_names_say():
    steps = _steps()
    assert "pip install" in _text(steps["install"]) and ".[dev]" in _text(steps["install"])
    assert steps["install"]["name"].startswith("python:3.11")
    assert "ruff" in _text(steps["lint"]) and "check" in _text(steps["lint"])
    assert re.search(r"pytest\b.*-m,? unit\b", _text(steps["unit"]).replace(",", ""))
    integration = _text(steps["integration"])
    assert "pytest -m integration" in integration
    # The emulator tests need Java and the emulators: installed, not skipped.
    for package in ("default-jre-headless", "google-cloud-cli-pubsub-emulator",
                    "google-cloud-cli-firestore-emulator"):
        assert package in integration


def test_deploy_applies_terraform_with_project_region_and_state_bucket():
    deploy = _steps()["deploy"]
    assert deploy["name"].startswith("hashicorp/terraform")
    assert deploy["dir"] == "infra"
    script = _text(deploy)
    assert "terraform init" in script and "terraform apply" in script and "-auto-approve" in script
    assert "-var project=$PROJECT_ID" in script
    assert "-var region=${_REGION}" in script
    assert "bucket=${_TF_STATE_BUCKET}" in script
    assert script.index("terraform init") < script.index("terraform apply")


def test_substitutions_are_declared_and_used():
    build = _build()
    declared = set(build["substitutions"])
    assert {"_REGION", "_TF_STATE_BUCKET"} <= declared
    text = CLOUDBUILD.read_text()
    used = set(re.findall(r"\$\{?(_[A-Z0-9_]+)", text))
    # MUST_MATCH fails a build whose substitutions and uses differ: keep them equal.
    assert used == declared
    assert build["options"]["substitutionOption"] == "MUST_MATCH"


def _seconds(duration: str) -> int:
    """Cloud Build's "1500s" or Terraform's "60m" / "1h" in seconds."""
    match = re.fullmatch(r"(\d+)([smh])", duration)
    assert match, f"{duration!r} is not a duration"
    return int(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]


def test_every_step_is_bounded_and_the_build_outlasts_their_sum():
    """A build's timeout defaults to 60 min (cloud.google.com/build/docs/build-config-file-schema):
    tests and a first apply that waits for a Vector Search deployment do not fit in it."""
    build = _build()
    steps = build["steps"]
    assert all("timeout" in step for step in steps), [s["id"] for s in steps if "timeout" not in s]
    total = sum(_seconds(step["timeout"]) for step in steps)
    # steps run one after another, so each may use its whole bound only if the build allows the sum
    assert _seconds(build["timeout"]) >= total
    assert _seconds(build["timeout"]) <= 24 * 3600  # Cloud Build's maximum


def test_the_deploy_step_outlasts_what_an_apply_waits_for():
    from tests.unit.test_infra import _resource

    def create_timeout(rtype: str, name: str, default: str) -> int:
        blocks = _resource(rtype, name).get("timeouts") or [{}]
        return _seconds(blocks[0].get("create", default))

    # the chain of an apply in Vector Search mode: the index, then its deployment, then the
    # functions (their environment names the deployed index); provider defaults where unset
    chain = (create_timeout("google_vertex_ai_index", "chunks", "180m")
             + create_timeout("google_vertex_ai_index_endpoint_deployed_index", "chunks", "45m")
             + create_timeout("google_cloudfunctions2_function", "function", "60m"))
    assert chain <= 165 * 60, "a create timeout grew: time the deploy step again"
    deploy = _seconds(_steps()["deploy"]["timeout"])
    assert deploy >= chain + 15 * 60, "the deploy step would cut a slow first apply short"


def test_service_usage_and_resource_manager_are_enabled_before_terraform_runs():
    steps = _steps()
    enable = steps["enable-apis"]
    assert enable["name"].startswith("gcr.io/google.com/cloudsdktool/cloud-sdk")
    assert enable["entrypoint"] == "gcloud" and enable["args"][:2] == ["services", "enable"]
    assert {"serviceusage.googleapis.com", "cloudresourcemanager.googleapis.com"} <= set(enable["args"])
    assert "--project=$PROJECT_ID" in enable["args"]
    assert steps["deploy"]["waitFor"] == ["enable-apis"]
